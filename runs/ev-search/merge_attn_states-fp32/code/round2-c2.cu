// merge_attn_states (fp32), Plan 2 (parent: round1-c1)
//  - Common shape (S % 128 == 0, 16-byte aligned V pointers, S <= 512, 32-bit index range,
//    enough rows): a persistent, exactly balanced grid of 132 x blocksPerSM 256-thread blocks.
//    Warp w streams the contiguous row range [w*R/W, (w+1)*R/W), one row (or two rows for
//    S = 128) per step. Lane l handles float4s l, l+32, ..., so every warp-wide access covers
//    512 contiguous bytes.
//  - Register double buffering: the V and LSE loads of the next step are issued before the
//    current step is computed and stored. The loop is unrolled by two with buffers A and B,
//    so no register copies wait on loads that are still in flight.
//  - (t, h) is stepped along the row range (h++, wrap -> t++), so li = h*T + t needs no
//    divide inside the loop. Every lane reads the two LSEs from the same address (a broadcast).
//  - c1's one-shot kernels remain the fallback for every other shape.
//  - c1's cache hints: ld.global.nc.L1::no_allocate loads, st.global.cs stores.
//  - c1's weight code is unchanged: +-inf -> -FLT_MAX, one exp + one log1p per row.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

__device__ __forceinline__ float4 ld_stream4(const float4* p) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
    return v;
}

// Volatile version for the pipelined kernel, so the compiler keeps the next step's loads
// ahead of the current step's stores.
__device__ __forceinline__ float4 ld_stream4_v(const float4* p) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ float ld_stream1(const float* p) {
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

// +-inf -> -FLT_MAX (as the original). With m = max(pa,pb), the larger side's exp is exactly 1,
// the other's is e = exp(-|pa-pb|). Both infinite: e = 1 -> plain average, LSE = -FLT_MAX.
// pa-pb overflowing to +-inf gives e = 0, which is correct.
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

// ---------------------------------------------------------------------------------------------
// Persistent warp-per-row kernel (S4 = S/4 is K*32).
// ---------------------------------------------------------------------------------------------
template <int K, int ROWS>
struct RowBuf {
    float4 a[ROWS][K];
    float4 b[ROWS][K];
    float pa[ROWS];
    float pb[ROWS];
    unsigned int li[ROWS];
};

// Loads rows r .. r+ROWS-1 (those < r1) into buf. (t, h) is the cursor of row r on entry and
// of the first row not loaded on exit.
template <int K, int ROWS>
__device__ __forceinline__ void load_rows(RowBuf<K, ROWS>& buf, const float4* __restrict__ V_a,
                                          const float4* __restrict__ V_b,
                                          const float* __restrict__ lse_a,
                                          const float* __restrict__ lse_b, unsigned int r,
                                          unsigned int r1, unsigned int& t, unsigned int& h,
                                          unsigned int T, unsigned int H, unsigned int S4,
                                          unsigned int lane) {
#pragma unroll
    for (int q = 0; q < ROWS; ++q) {
        if (r + (unsigned int)q < r1) {  // warp-uniform
            const unsigned int li = h * T + t;
            buf.li[q] = li;
            buf.pa[q] = __ldg(lse_a + li);
            buf.pb[q] = __ldg(lse_b + li);
            const unsigned int base = (r + (unsigned int)q) * S4 + lane;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                buf.a[q][k] = ld_stream4_v(V_a + base + (unsigned int)(k * 32));
                buf.b[q][k] = ld_stream4_v(V_b + base + (unsigned int)(k * 32));
            }
            if (++h == H) {
                h = 0;
                ++t;
            }
        }
    }
}

template <int K, int ROWS>
__device__ __forceinline__ void store_rows(const RowBuf<K, ROWS>& buf, float4* __restrict__ V_out,
                                           float* __restrict__ LSE_out, unsigned int r,
                                           unsigned int r1, unsigned int S4, unsigned int lane) {
#pragma unroll
    for (int q = 0; q < ROWS; ++q) {
        if (r + (unsigned int)q < r1) {  // warp-uniform
            float wa, wb, lse;
            merge_weights(buf.pa[q], buf.pb[q], wa, wb, lse);
            const unsigned int base = (r + (unsigned int)q) * S4 + lane;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                float4 o;
                o.x = fmaf(buf.a[q][k].x, wa, buf.b[q][k].x * wb);
                o.y = fmaf(buf.a[q][k].y, wa, buf.b[q][k].y * wb);
                o.z = fmaf(buf.a[q][k].z, wa, buf.b[q][k].z * wb);
                o.w = fmaf(buf.a[q][k].w, wa, buf.b[q][k].w * wb);
                __stcs(V_out + base + (unsigned int)(k * 32), o);
            }
            if (LSE_out != nullptr && lane == 0) LSE_out[buf.li[q]] = lse;
        }
    }
}

template <int K, int ROWS, int MINB>
__global__ void __launch_bounds__(256, MINB)
merge_persist_kernel(float4* __restrict__ V_out, float* __restrict__ LSE_out,
                     const float4* __restrict__ V_a, const float* __restrict__ lse_a,
                     const float4* __restrict__ V_b, const float* __restrict__ lse_b,
                     unsigned int T, unsigned int H, unsigned int R) {
    const unsigned int S4 = (unsigned int)(K * 32);
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int wpb = blockDim.x >> 5;
    const unsigned long long W = (unsigned long long)gridDim.x * wpb;
    const unsigned long long w = (unsigned long long)blockIdx.x * wpb + (threadIdx.x >> 5);
    unsigned int r = (unsigned int)((w * (unsigned long long)R) / W);
    const unsigned int r1 = (unsigned int)(((w + 1ull) * (unsigned long long)R) / W);
    if (r >= r1) return;

    unsigned int t = r / H;
    unsigned int h = r - t * H;

    RowBuf<K, ROWS> A, B;
    load_rows<K, ROWS>(A, V_a, V_b, lse_a, lse_b, r, r1, t, h, T, H, S4, lane);
    while (true) {
        unsigned int rn = r + (unsigned int)ROWS;
        if (rn < r1) load_rows<K, ROWS>(B, V_a, V_b, lse_a, lse_b, rn, r1, t, h, T, H, S4, lane);
        store_rows<K, ROWS>(A, V_out, LSE_out, r, r1, S4, lane);
        r = rn;
        if (r >= r1) break;

        rn = r + (unsigned int)ROWS;
        if (rn < r1) load_rows<K, ROWS>(A, V_a, V_b, lse_a, lse_b, rn, r1, t, h, T, H, S4, lane);
        store_rows<K, ROWS>(B, V_out, LSE_out, r, r1, S4, lane);
        r = rn;
        if (r >= r1) break;
    }
}

// ---------------------------------------------------------------------------------------------
// c1 kernels (the fallback for every other shape).
// ---------------------------------------------------------------------------------------------
// Vector path: S4 = S/4 float4s per row, tpr = S4/N threads per row.
// Thread g: row r = g / tpr, lane-in-row j; it handles float4s j, j+tpr, ..., j+(N-1)*tpr.
template <int N, typename IdxT>
__global__ void __launch_bounds__(256)
merge_vec_kernel(float4* __restrict__ V_out, float* __restrict__ LSE_out,
                 const float4* __restrict__ V_a, const float* __restrict__ lse_a,
                 const float4* __restrict__ V_b, const float* __restrict__ lse_b,
                 IdxT T, IdxT H, IdxT S4, IdxT tpr, IdxT total) {
    const IdxT g = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x;
    if (g >= total) return;
    const IdxT r = g / tpr;
    const IdxT j = g - r * tpr;
    const IdxT t = r / H;
    const IdxT h = r - t * H;
    const IdxT li = h * T + t;

    const float pa = __ldg(lse_a + li);
    const float pb = __ldg(lse_b + li);
    const IdxT base = r * S4 + j;
    float4 a[N], b[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        a[k] = ld_stream4(V_a + base + (IdxT)k * tpr);
        b[k] = ld_stream4(V_b + base + (IdxT)k * tpr);
    }

    float wa, wb, lse;
    merge_weights(pa, pb, wa, wb, lse);

#pragma unroll
    for (int k = 0; k < N; ++k) {
        float4 o;
        o.x = fmaf(a[k].x, wa, b[k].x * wb);
        o.y = fmaf(a[k].y, wa, b[k].y * wb);
        o.z = fmaf(a[k].z, wa, b[k].z * wb);
        o.w = fmaf(a[k].w, wa, b[k].w * wb);
        __stcs(V_out + base + (IdxT)k * tpr, o);
    }
    if (LSE_out != nullptr && j == 0) LSE_out[li] = lse;
}

// Scalar fallback: one float per thread, rows of S floats.
template <typename IdxT>
__global__ void __launch_bounds__(256)
merge_scalar_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                    const float* __restrict__ V_a, const float* __restrict__ lse_a,
                    const float* __restrict__ V_b, const float* __restrict__ lse_b,
                    IdxT T, IdxT H, IdxT S, IdxT total) {
    const IdxT g = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x;
    if (g >= total) return;
    const IdxT r = g / S;
    const IdxT s = g - r * S;
    const IdxT t = r / H;
    const IdxT h = r - t * H;
    const IdxT li = h * T + t;

    const float pa = __ldg(lse_a + li);
    const float pb = __ldg(lse_b + li);
    const float va = ld_stream1(V_a + g);
    const float vb = ld_stream1(V_b + g);

    float wa, wb, lse;
    merge_weights(pa, pb, wa, wb, lse);

    __stcs(V_out + g, fmaf(va, wa, vb * wb));
    if (LSE_out != nullptr && s == 0) LSE_out[li] = lse;
}

template <typename IdxT>
static void launch_all(float* V_out, float* LSE_out, const float* V_a, const float* lse_a,
                       const float* V_b, const float* lse_b, long long T, long long H,
                       long long S, bool vec) {
    const int threads = 256;
    const long long rows = T * H;
    if (vec) {
        const long long S4 = S / 4;
        if ((S4 % 2) == 0) {
            const long long tpr = S4 / 2;
            const long long total = rows * tpr;
            const unsigned int blocks = (unsigned int)((total + threads - 1) / threads);
            merge_vec_kernel<2, IdxT><<<blocks, threads>>>(
                reinterpret_cast<float4*>(V_out), LSE_out,
                reinterpret_cast<const float4*>(V_a), lse_a,
                reinterpret_cast<const float4*>(V_b), lse_b, (IdxT)T, (IdxT)H, (IdxT)S4,
                (IdxT)tpr, (IdxT)total);
        } else {
            const long long tpr = S4;
            const long long total = rows * tpr;
            const unsigned int blocks = (unsigned int)((total + threads - 1) / threads);
            merge_vec_kernel<1, IdxT><<<blocks, threads>>>(
                reinterpret_cast<float4*>(V_out), LSE_out,
                reinterpret_cast<const float4*>(V_a), lse_a,
                reinterpret_cast<const float4*>(V_b), lse_b, (IdxT)T, (IdxT)H, (IdxT)S4,
                (IdxT)tpr, (IdxT)total);
        }
    } else {
        const long long total = rows * S;
        const unsigned int blocks = (unsigned int)((total + threads - 1) / threads);
        merge_scalar_kernel<IdxT><<<blocks, threads>>>(V_out, LSE_out, V_a, lse_a, V_b, lse_b,
                                                       (IdxT)T, (IdxT)H, (IdxT)S, (IdxT)total);
    }
}

// ---------------------------------------------------------------------------------------------
// Persistent launch helpers.
// ---------------------------------------------------------------------------------------------
static int get_sm_count() {
    static int n = -1;
    if (n < 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            v <= 0) {
            (void)cudaGetLastError();
            v = 132;
        }
        n = v;
    }
    return n;
}

// Returns false (launching nothing) when the persistent path does not apply.
template <int K, int ROWS, int MINB>
static bool launch_persist(float* V_out, float* LSE_out, const float* V_a, const float* lse_a,
                           const float* V_b, const float* lse_b, long long T, long long H) {
    const int threads = 256;
    static int bps = -1;  // blocks per SM, queried once per instantiation
    if (bps < 0) {
        int v = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &v, merge_persist_kernel<K, ROWS, MINB>, threads, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            v = 0;
        }
        bps = v;
    }
    if (bps <= 0) return false;
    const long long blocks = (long long)get_sm_count() * (long long)bps;
    const long long W = blocks * (threads / 32);
    const long long R = T * H;
    if (R < W) return false;  // tiny inputs: c1's one-shot kernels
    merge_persist_kernel<K, ROWS, MINB><<<(unsigned int)blocks, threads>>>(
        reinterpret_cast<float4*>(V_out), LSE_out, reinterpret_cast<const float4*>(V_a), lse_a,
        reinterpret_cast<const float4*>(V_b), lse_b, (unsigned int)T, (unsigned int)H,
        (unsigned int)R);
    return true;
}

extern "C" void merge_attn_states(float* V_out, float* LSE_out, const float* V_a,
                                  const float* lse_a, const float* V_b, const float* lse_b,
                                  int num_tokens, int num_heads, int head_size) {
    if (num_tokens > 0 && num_heads > 0 && head_size > 0) {
        const long long T = num_tokens, H = num_heads, S = head_size;
        const long long elems = T * H * S;
        const uintptr_t align_bits =
            (reinterpret_cast<uintptr_t>(V_out) | reinterpret_cast<uintptr_t>(V_a) |
             reinterpret_cast<uintptr_t>(V_b)) & (uintptr_t)15;
        const bool vec = ((S % 4) == 0) && (align_bits == 0);

        bool done = false;
        if (vec && (S % 128) == 0 && elems < (1LL << 31)) {
            switch (S / 128) {
                case 1:
                    done = launch_persist<1, 2, 4>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H);
                    break;
                case 2:
                    done = launch_persist<2, 1, 4>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H);
                    break;
                case 3:
                    done = launch_persist<3, 1, 2>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H);
                    break;
                case 4:
                    done = launch_persist<4, 1, 2>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H);
                    break;
                default:
                    break;
            }
        }
        if (!done) {
            if (elems < (1LL << 31)) {
                launch_all<unsigned int>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, vec);
            } else {
                launch_all<unsigned long long>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S,
                                               vec);
            }
        }
    }
    cudaDeviceSynchronize();
}
