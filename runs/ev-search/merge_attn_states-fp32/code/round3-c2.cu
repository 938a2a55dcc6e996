// merge_attn_states (fp32), round3 Plan 2 (parent: round2-c1)
//  - same per-thread work as round2-c1: flat 1-D grid, tpr threads per row, N float4 per tensor
//    per thread (j-strided), evict_first L2 hint on the V loads, plain stores, same weight math
//  - ONLY change: the flat row index rho is remapped to (tb, h, tt), tt fastest:
//        rho = (tb*H + h)*TT + tt,   t = tb*TT + tt
//    so consecutive rows are consecutive tokens of one head (TT = 8 tokens = one 32 B LSE sector).
//    V row stays at (t*H + h)*S, LSE index at h*T + t. T is padded to Tp = ceil(T/TT)*TT and
//    threads with t >= T return (exact for any T).
//  - compile-time switches:
//      MAS_TT        : token-tile size (power of two; sweep 8 / 16 / 32), default 8
//      MAS_LOAD_MODE : 0 = ld.global.nc.L1::no_allocate, 1 = ld.global.cs,
//                      2 = ld.global.nc.L1::no_allocate.L2::cache_hint + evict_first (default)
//      MAS_STORE_MODE: 0 = st.global.cs, 1 = plain st.global (default),
//                      2 = st.global.L2::cache_hint + evict_last
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#ifndef MAS_TT
#define MAS_TT 8
#endif
#ifndef MAS_LOAD_MODE
#define MAS_LOAD_MODE 2
#endif
#ifndef MAS_STORE_MODE
#define MAS_STORE_MODE 1
#endif

static_assert(MAS_TT >= 1 && (MAS_TT & (MAS_TT - 1)) == 0, "MAS_TT must be a power of two");

// ----------------------------------------------------------------------------------------------
// Cache policies
// ----------------------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t make_policy_evict_first() {
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

__device__ __forceinline__ uint64_t make_policy_evict_last() {
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

// ----------------------------------------------------------------------------------------------
// Loads
// ----------------------------------------------------------------------------------------------
__device__ __forceinline__ float4 ld_v4(const float4* p, uint64_t pol) {
    float4 v;
#if MAS_LOAD_MODE == 2
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p), "l"(pol));
#elif MAS_LOAD_MODE == 1
    (void)pol;
    v = __ldcs(p);
#else
    (void)pol;
    asm("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
#endif
    return v;
}

__device__ __forceinline__ float ld_v1(const float* p, uint64_t pol) {
    float v;
#if MAS_LOAD_MODE == 2
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.f32 %0, [%1], %2;"
        : "=f"(v)
        : "l"(p), "l"(pol));
#elif MAS_LOAD_MODE == 1
    (void)pol;
    v = __ldcs(p);
#else
    (void)pol;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
#endif
    return v;
}

__device__ __forceinline__ uint64_t make_load_policy() {
#if MAS_LOAD_MODE == 2
    return make_policy_evict_first();
#else
    return 0ull;
#endif
}

// ----------------------------------------------------------------------------------------------
// Stores
// ----------------------------------------------------------------------------------------------
__device__ __forceinline__ void st_v4(float4* p, float4 v, uint64_t pol) {
#if MAS_STORE_MODE == 2
    asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;"
                 :
                 : "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "l"(pol)
                 : "memory");
#elif MAS_STORE_MODE == 0
    (void)pol;
    __stcs(p, v);
#else
    (void)pol;
    *p = v;
#endif
}

__device__ __forceinline__ void st_v1(float* p, float v, uint64_t pol) {
#if MAS_STORE_MODE == 2
    asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;"
                 :
                 : "l"(p), "f"(v), "l"(pol)
                 : "memory");
#elif MAS_STORE_MODE == 0
    (void)pol;
    __stcs(p, v);
#else
    (void)pol;
    *p = v;
#endif
}

__device__ __forceinline__ uint64_t make_store_policy() {
#if MAS_STORE_MODE == 2
    return make_policy_evict_last();
#else
    return 0ull;
#endif
}

// ----------------------------------------------------------------------------------------------
// Weights (unchanged)
// +-inf -> -FLT_MAX (as the original). With m = max(pa,pb), the larger side's exp is exactly 1,
// the other's is e = exp(-|pa-pb|). Both infinite: e = 1 -> plain average, LSE = -FLT_MAX.
// pa-pb overflowing to +-inf gives e = 0, which is correct.
// ----------------------------------------------------------------------------------------------
__device__ __forceinline__ void merge_weights(float pa, float pb, float& wa, float& wb,
                                              float& lse) {
    pa = isinf(pa) ? -FLT_MAX : pa;
    pb = isinf(pb) ? -FLT_MAX : pb;
    const float m = fmaxf(pa, pb);
    const float e = expf(-fabsf(pa - pb));
    const float inv = 1.0f / (1.0f + e);
    const float sm = e * inv;
    const bool a_ge = pa >= pb;
    wa = a_ge ? inv : sm;
    wb = a_ge ? sm : inv;
    lse = m + log1pf(e);
}

// ----------------------------------------------------------------------------------------------
// Row remap: flat (padded) row index rho -> (t, h), token fastest inside a TT-token tile.
//   rho = (tb*H + h)*TT + tt, t = tb*TT + tt. Returns false for padding rows (t >= T).
// ----------------------------------------------------------------------------------------------
template <int TT, typename IdxT>
__device__ __forceinline__ bool remap_row(IdxT rho, IdxT T, IdxT H, IdxT& t, IdxT& h) {
    const IdxT tt = rho & (IdxT)(TT - 1);
    const IdxT q = rho / (IdxT)TT;  // power of two -> shift
    const IdxT tb = q / H;
    h = q - tb * H;
    t = tb * (IdxT)TT + tt;
    return t < T;
}

// Vector path: S4 = S/4 float4s per row, tpr = S4/N threads per row.
// Thread g: padded row rho = g / tpr, lane-in-row j; it handles float4s j, j+tpr, ..., j+(N-1)*tpr.
template <int N, int TT, typename IdxT>
__global__ void __launch_bounds__(256)
merge_vec_kernel(float4* __restrict__ V_out, float* __restrict__ LSE_out,
                 const float4* __restrict__ V_a, const float* __restrict__ lse_a,
                 const float4* __restrict__ V_b, const float* __restrict__ lse_b,
                 IdxT T, IdxT H, IdxT S4, IdxT tpr, IdxT total) {
    const IdxT g = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x;
    if (g >= total) return;
    const IdxT rho = g / tpr;
    const IdxT j = g - rho * tpr;
    IdxT t, h;
    if (!remap_row<TT, IdxT>(rho, T, H, t, h)) return;
    const IdxT li = h * T + t;
    const IdxT r = t * H + h;

    const uint64_t lpol = make_load_policy();

    // Issue every load before any arithmetic.
    const float pa = __ldg(lse_a + li);
    const float pb = __ldg(lse_b + li);
    const IdxT base = r * S4 + j;
    float4 a[N], b[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        a[k] = ld_v4(V_a + base + (IdxT)k * tpr, lpol);
        b[k] = ld_v4(V_b + base + (IdxT)k * tpr, lpol);
    }

    float wa, wb, lse;
    merge_weights(pa, pb, wa, wb, lse);

    const uint64_t spol = make_store_policy();
#pragma unroll
    for (int k = 0; k < N; ++k) {
        float4 o;
        o.x = fmaf(a[k].x, wa, b[k].x * wb);
        o.y = fmaf(a[k].y, wa, b[k].y * wb);
        o.z = fmaf(a[k].z, wa, b[k].z * wb);
        o.w = fmaf(a[k].w, wa, b[k].w * wb);
        st_v4(V_out + base + (IdxT)k * tpr, o, spol);
    }
    if (LSE_out != nullptr && j == 0) LSE_out[li] = lse;
}

// Scalar fallback: one float per thread, rows of S floats, same row remap.
template <int TT, typename IdxT>
__global__ void __launch_bounds__(256)
merge_scalar_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                    const float* __restrict__ V_a, const float* __restrict__ lse_a,
                    const float* __restrict__ V_b, const float* __restrict__ lse_b,
                    IdxT T, IdxT H, IdxT S, IdxT total) {
    const IdxT g = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x;
    if (g >= total) return;
    const IdxT rho = g / S;
    const IdxT s = g - rho * S;
    IdxT t, h;
    if (!remap_row<TT, IdxT>(rho, T, H, t, h)) return;
    const IdxT li = h * T + t;
    const IdxT idx = (t * H + h) * S + s;

    const uint64_t lpol = make_load_policy();

    const float pa = __ldg(lse_a + li);
    const float pb = __ldg(lse_b + li);
    const float va = ld_v1(V_a + idx, lpol);
    const float vb = ld_v1(V_b + idx, lpol);

    float wa, wb, lse;
    merge_weights(pa, pb, wa, wb, lse);

    const uint64_t spol = make_store_policy();
    st_v1(V_out + idx, fmaf(va, wa, vb * wb), spol);
    if (LSE_out != nullptr && s == 0) LSE_out[li] = lse;
}

template <typename IdxT>
static void launch_all(float* V_out, float* LSE_out, const float* V_a, const float* lse_a,
                       const float* V_b, const float* lse_b, long long T, long long H,
                       long long S, long long Tp, bool vec) {
    constexpr int TT = MAS_TT;
    const int threads = 256;
    const long long prows = Tp * H;  // padded row count
    if (vec) {
        const long long S4 = S / 4;
        if ((S4 % 2) == 0) {
            const long long tpr = S4 / 2;
            const long long total = prows * tpr;
            const unsigned int blocks = (unsigned int)((total + threads - 1) / threads);
            merge_vec_kernel<2, TT, IdxT><<<blocks, threads>>>(
                reinterpret_cast<float4*>(V_out), LSE_out,
                reinterpret_cast<const float4*>(V_a), lse_a,
                reinterpret_cast<const float4*>(V_b), lse_b, (IdxT)T, (IdxT)H, (IdxT)S4,
                (IdxT)tpr, (IdxT)total);
        } else {
            const long long tpr = S4;
            const long long total = prows * tpr;
            const unsigned int blocks = (unsigned int)((total + threads - 1) / threads);
            merge_vec_kernel<1, TT, IdxT><<<blocks, threads>>>(
                reinterpret_cast<float4*>(V_out), LSE_out,
                reinterpret_cast<const float4*>(V_a), lse_a,
                reinterpret_cast<const float4*>(V_b), lse_b, (IdxT)T, (IdxT)H, (IdxT)S4,
                (IdxT)tpr, (IdxT)total);
        }
    } else {
        const long long total = prows * S;
        const unsigned int blocks = (unsigned int)((total + threads - 1) / threads);
        merge_scalar_kernel<TT, IdxT><<<blocks, threads>>>(V_out, LSE_out, V_a, lse_a, V_b,
                                                           lse_b, (IdxT)T, (IdxT)H, (IdxT)S,
                                                           (IdxT)total);
    }
}

extern "C" void merge_attn_states(float* V_out, float* LSE_out, const float* V_a,
                                  const float* lse_a, const float* V_b, const float* lse_b,
                                  int num_tokens, int num_heads, int head_size) {
    if (num_tokens > 0 && num_heads > 0 && head_size > 0) {
        const long long T = num_tokens, H = num_heads, S = head_size;
        const long long TT = MAS_TT;
        const long long Tp = ((T + TT - 1) / TT) * TT;
        // Padded element count bounds every index and every thread id used by the kernels.
        const long long pelems = Tp * H * S;
        const uintptr_t align_bits =
            (reinterpret_cast<uintptr_t>(V_out) | reinterpret_cast<uintptr_t>(V_a) |
             reinterpret_cast<uintptr_t>(V_b)) & (uintptr_t)15;
        const bool vec = ((S % 4) == 0) && (align_bits == 0);
        if (pelems < (1LL << 31)) {
            launch_all<unsigned int>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, Tp, vec);
        } else {
            launch_all<unsigned long long>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, Tp,
                                           vec);
        }
    }
    cudaDeviceSynchronize();
}
