// merge_attn_states (fp32), round3 Plan 1 (parent: round2-c1)
//  Memory-traffic experiment matrix (all compile-time switches; defaults are conservative):
//    MAS_LOAD_MODE  : 0 = ld.global.nc.L1::no_allocate            (no L2 hint)
//                     1 = ld.global.cs
//                     2 = ld.global.nc.L1::no_allocate.L2::cache_hint   (parent, path a)
//                     3 = ld.global.L1::no_allocate.L2::cache_hint      (coherent, path b) [default]
//                     4 = ld.global.lu
//                     5 = ld.global.L2::cache_hint                      (coherent, no L1 qualifier)
//    MAS_LOAD_POLICY: policy used by modes 2/3/5: 0 = evict_first [default], 1 = evict_last (A/B
//                     control), 2 = evict_normal
//    MAS_STORE_MODE : 0 = st.global.cs, 1 = plain st.global [default],
//                     2 = st.global.L2::cache_hint evict_last, 3 = st.global.L2::cache_hint evict_first
//    MAS_APW        : 0 = off [default]; 1 = per-launch access-policy window (Streaming/Streaming,
//                     hitRatio 1) over V_a; 2 = over V_a..V_b if one window spans both, else V_a
//    MAS_CTAS_PER_SM: 0 = no cap [default]; k = at most k CTAs (256 threads) resident per SM
//    MAS_CAP_METHOD : 0 = dummy dynamic shared-memory reservation [default]; 1 = persistent grid
//                     of k * numSMs blocks (grid-stride)
//    MAS_N4         : 1 = 4 float4 per tensor per thread when S4 % 4 == 0 (fewer threads)
//  LSE loads stay at normal priority (__ldg): 8 tokens share each 32 B sector.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifndef MAS_LOAD_MODE
#define MAS_LOAD_MODE 3
#endif
#ifndef MAS_LOAD_POLICY
#define MAS_LOAD_POLICY 0
#endif
#ifndef MAS_STORE_MODE
#define MAS_STORE_MODE 1
#endif
#ifndef MAS_APW
#define MAS_APW 0
#endif
#ifndef MAS_CTAS_PER_SM
#define MAS_CTAS_PER_SM 0
#endif
#ifndef MAS_CAP_METHOD
#define MAS_CAP_METHOD 0
#endif
#ifndef MAS_N4
#define MAS_N4 0
#endif

#if (MAS_LOAD_MODE == 2) || (MAS_LOAD_MODE == 3) || (MAS_LOAD_MODE == 5)
#define MAS_LOAD_USES_POLICY 1
#else
#define MAS_LOAD_USES_POLICY 0
#endif

#if (MAS_STORE_MODE == 2) || (MAS_STORE_MODE == 3)
#define MAS_STORE_USES_POLICY 1
#else
#define MAS_STORE_USES_POLICY 0
#endif

#define MAS_THREADS 256

// ----------------------------------------------------------------------------------------------
// Cache policies
// ----------------------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t make_load_policy() {
#if MAS_LOAD_USES_POLICY
    uint64_t pol;
#if MAS_LOAD_POLICY == 1
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#elif MAS_LOAD_POLICY == 2
    asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
#else
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
#else
    return 0ull;
#endif
}

__device__ __forceinline__ uint64_t make_store_policy() {
#if MAS_STORE_USES_POLICY
    uint64_t pol;
#if MAS_STORE_MODE == 3
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#else
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
#else
    return 0ull;
#endif
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
#elif MAS_LOAD_MODE == 3
    asm("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p), "l"(pol));
#elif MAS_LOAD_MODE == 5
    asm("ld.global.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p), "l"(pol));
#elif MAS_LOAD_MODE == 4
    (void)pol;
    asm("ld.global.lu.v4.f32 {%0,%1,%2,%3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
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
#elif MAS_LOAD_MODE == 3
    asm("ld.global.L1::no_allocate.L2::cache_hint.f32 %0, [%1], %2;"
        : "=f"(v)
        : "l"(p), "l"(pol));
#elif MAS_LOAD_MODE == 5
    asm("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(pol));
#elif MAS_LOAD_MODE == 4
    (void)pol;
    asm("ld.global.lu.f32 %0, [%1];" : "=f"(v) : "l"(p));
#elif MAS_LOAD_MODE == 1
    (void)pol;
    v = __ldcs(p);
#else
    (void)pol;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
#endif
    return v;
}

// ----------------------------------------------------------------------------------------------
// Stores
// ----------------------------------------------------------------------------------------------
__device__ __forceinline__ void st_v4(float4* p, float4 v, uint64_t pol) {
#if MAS_STORE_USES_POLICY
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
#if MAS_STORE_USES_POLICY
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

// ----------------------------------------------------------------------------------------------
// Weights (unchanged from c1)
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
// Vector path: S4 = S/4 float4s per row, tpr = S4/N threads per row.
// Item g: row r = g / tpr, lane-in-row j; it handles float4s j, j+tpr, ..., j+(N-1)*tpr.
// Grid-stride loop: uncapped launches cover every item in exactly one pass.
// ----------------------------------------------------------------------------------------------
template <int N, typename IdxT>
__global__ void __launch_bounds__(MAS_THREADS)
merge_vec_kernel(float4* __restrict__ V_out, float* __restrict__ LSE_out,
                 const float4* __restrict__ V_a, const float* __restrict__ lse_a,
                 const float4* __restrict__ V_b, const float* __restrict__ lse_b,
                 IdxT T, IdxT H, IdxT S4, IdxT tpr, IdxT total) {
    const uint64_t lpol = make_load_policy();
    const uint64_t spol = make_store_policy();
    const IdxT stride = (IdxT)gridDim.x * (IdxT)blockDim.x;

    for (IdxT g = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x; g < total;
         g += stride) {
        const IdxT r = g / tpr;
        const IdxT j = g - r * tpr;
        const IdxT t = r / H;
        const IdxT h = r - t * H;
        const IdxT li = h * T + t;

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
}

// Scalar fallback: one float per item, rows of S floats.
template <typename IdxT>
__global__ void __launch_bounds__(MAS_THREADS)
merge_scalar_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                    const float* __restrict__ V_a, const float* __restrict__ lse_a,
                    const float* __restrict__ V_b, const float* __restrict__ lse_b,
                    IdxT T, IdxT H, IdxT S, IdxT total) {
    const uint64_t lpol = make_load_policy();
    const uint64_t spol = make_store_policy();
    const IdxT stride = (IdxT)gridDim.x * (IdxT)blockDim.x;

    for (IdxT g = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x; g < total;
         g += stride) {
        const IdxT r = g / S;
        const IdxT s = g - r * S;
        const IdxT t = r / H;
        const IdxT h = r - t * H;
        const IdxT li = h * T + t;

        const float pa = __ldg(lse_a + li);
        const float pb = __ldg(lse_b + li);
        const float va = ld_v1(V_a + g, lpol);
        const float vb = ld_v1(V_b + g, lpol);

        float wa, wb, lse;
        merge_weights(pa, pb, wa, wb, lse);

        st_v1(V_out + g, fmaf(va, wa, vb * wb), spol);
        if (LSE_out != nullptr && s == 0) LSE_out[li] = lse;
    }
}

// ----------------------------------------------------------------------------------------------
// Host side
// ----------------------------------------------------------------------------------------------
struct DevInfo {
    int sms;
    int smem_per_sm;
    int reserved_smem;
    int smem_optin;
    int max_window;
};

static DevInfo get_dev_info(int dev) {
    static DevInfo cache[64];
    static bool have[64] = {};
    if (dev >= 0 && dev < 64 && have[dev]) return cache[dev];
    DevInfo d;
    d.sms = 0;
    d.smem_per_sm = 0;
    d.reserved_smem = 0;
    d.smem_optin = 0;
    d.max_window = 0;
    if (cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        d.sms = 0;
    if (cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                               dev) != cudaSuccess)
        d.smem_per_sm = 0;
    if (cudaDeviceGetAttribute(&d.reserved_smem, cudaDevAttrReservedSharedMemoryPerBlock, dev) !=
        cudaSuccess)
        d.reserved_smem = 0;
    if (cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
        cudaSuccess)
        d.smem_optin = 0;
    if (cudaDeviceGetAttribute(&d.max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev) !=
        cudaSuccess)
        d.max_window = 0;
    (void)cudaGetLastError();
    if (dev >= 0 && dev < 64) {
        cache[dev] = d;
        have[dev] = true;
    }
    return d;
}

struct LaunchEnv {
    int dev;
    size_t cap_smem;       // dummy dynamic smem per block (cap method 0), 0 = none
    long long cap_blocks;  // max grid size (cap method 1), 0 = unlimited
    void* win_base;        // access-policy window, win_bytes == 0 = none
    size_t win_bytes;
};

// Per (kernel, device) record of the dynamic-smem attribute already set.
static bool ensure_kernel_smem(const void* key, int dev, size_t smem, cudaError_t (*setter)(
                                   const void*, size_t)) {
    struct Entry {
        const void* key;
        int dev;
        size_t smem;
        bool ok;
    };
    static Entry tbl[64];
    static int n = 0;
    for (int i = 0; i < n; ++i) {
        if (tbl[i].key == key && tbl[i].dev == dev && tbl[i].smem == smem) return tbl[i].ok;
    }
    const bool ok = (setter(key, smem) == cudaSuccess);
    (void)cudaGetLastError();
    if (n < 64) {
        tbl[n].key = key;
        tbl[n].dev = dev;
        tbl[n].smem = smem;
        tbl[n].ok = ok;
        ++n;
    }
    return ok;
}

static cudaError_t set_smem_attrs(const void* func, size_t smem) {
    cudaError_t e = cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         (int)cudaSharedmemCarveoutMaxShared);
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

template <typename... KArgs, typename... Args>
static void launch_k(void (*kernel)(KArgs...), long long work, const LaunchEnv& env,
                     Args... args) {
    long long blocks = (work + MAS_THREADS - 1) / MAS_THREADS;
    if (blocks < 1) blocks = 1;
    if (env.cap_blocks > 0 && blocks > env.cap_blocks) blocks = env.cap_blocks;
    if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;  // grid-stride loop covers the rest

    size_t smem = env.cap_smem;
    if (smem > 0) {
        const void* key = reinterpret_cast<const void*>(kernel);
        if (!ensure_kernel_smem(key, env.dev, smem, &set_smem_attrs)) smem = 0;
    }

    cudaLaunchAttribute attr[1];
    unsigned int nattr = 0;
    if (env.win_bytes > 0 && env.win_base != nullptr) {
        attr[0].id = cudaLaunchAttributeAccessPolicyWindow;
        attr[0].val.accessPolicyWindow.base_ptr = env.win_base;
        attr[0].val.accessPolicyWindow.num_bytes = env.win_bytes;
        attr[0].val.accessPolicyWindow.hitRatio = 1.0f;
        attr[0].val.accessPolicyWindow.hitProp = cudaAccessPropertyStreaming;
        attr[0].val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
        nattr = 1;
    }

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned int)blocks, 1, 1);
    cfg.blockDim = dim3(MAS_THREADS, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    cfg.attrs = attr;
    cfg.numAttrs = nattr;

    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
    if (e != cudaSuccess && (nattr != 0 || smem != 0)) {
        // Fall back to a plain launch so the output is always produced.
        (void)cudaGetLastError();
        cudaLaunchConfig_t plain = {};
        plain.gridDim = cfg.gridDim;
        plain.blockDim = cfg.blockDim;
        plain.dynamicSmemBytes = 0;
        plain.stream = 0;
        plain.attrs = nullptr;
        plain.numAttrs = 0;
        (void)cudaLaunchKernelEx(&plain, kernel, args...);
    }
}

template <typename IdxT>
static void launch_all(float* V_out, float* LSE_out, const float* V_a, const float* lse_a,
                       const float* V_b, const float* lse_b, long long T, long long H,
                       long long S, bool vec, const LaunchEnv& env) {
    const long long rows = T * H;
    if (vec) {
        const long long S4 = S / 4;
        float4* o4 = reinterpret_cast<float4*>(V_out);
        const float4* a4 = reinterpret_cast<const float4*>(V_a);
        const float4* b4 = reinterpret_cast<const float4*>(V_b);
#if MAS_N4
        if ((S4 % 4) == 0) {
            const long long tpr = S4 / 4;
            const long long total = rows * tpr;
            launch_k(merge_vec_kernel<4, IdxT>, total, env, o4, LSE_out, a4, lse_a, b4, lse_b,
                     (IdxT)T, (IdxT)H, (IdxT)S4, (IdxT)tpr, (IdxT)total);
            return;
        }
#endif
        if ((S4 % 2) == 0) {
            const long long tpr = S4 / 2;
            const long long total = rows * tpr;
            launch_k(merge_vec_kernel<2, IdxT>, total, env, o4, LSE_out, a4, lse_a, b4, lse_b,
                     (IdxT)T, (IdxT)H, (IdxT)S4, (IdxT)tpr, (IdxT)total);
        } else {
            const long long tpr = S4;
            const long long total = rows * tpr;
            launch_k(merge_vec_kernel<1, IdxT>, total, env, o4, LSE_out, a4, lse_a, b4, lse_b,
                     (IdxT)T, (IdxT)H, (IdxT)S4, (IdxT)tpr, (IdxT)total);
        }
    } else {
        const long long total = rows * S;
        launch_k(merge_scalar_kernel<IdxT>, total, env, V_out, LSE_out, V_a, lse_a, V_b, lse_b,
                 (IdxT)T, (IdxT)H, (IdxT)S, (IdxT)total);
    }
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

        LaunchEnv env;
        env.dev = 0;
        env.cap_smem = 0;
        env.cap_blocks = 0;
        env.win_base = nullptr;
        env.win_bytes = 0;

#if (MAS_CTAS_PER_SM > 0) || (MAS_APW > 0)
        {
            int dev = 0;
            if (cudaGetDevice(&dev) != cudaSuccess) {
                (void)cudaGetLastError();
                dev = 0;
            }
            env.dev = dev;
            const DevInfo di = get_dev_info(dev);

#if MAS_CTAS_PER_SM > 0
#if MAS_CAP_METHOD == 1
            if (di.sms > 0) env.cap_blocks = (long long)MAS_CTAS_PER_SM * (long long)di.sms;
#else
            if (di.smem_per_sm > 0) {
                long long per = ((long long)di.smem_per_sm / MAS_CTAS_PER_SM) & ~127LL;
                long long bytes = per - (long long)di.reserved_smem;
                if (di.smem_optin > 0 && bytes > (long long)di.smem_optin)
                    bytes = (long long)di.smem_optin;
                if (bytes > 0) env.cap_smem = (size_t)bytes;
            }
#endif
#endif

#if MAS_APW > 0
            if (di.max_window > 0) {
                const size_t vbytes = (size_t)elems * sizeof(float);
                const size_t maxw = (size_t)di.max_window;
                const uintptr_t a0 = reinterpret_cast<uintptr_t>(V_a);
                size_t wbytes = vbytes < maxw ? vbytes : maxw;
                uintptr_t wbase = a0;
#if MAS_APW == 2
                {
                    const uintptr_t b0 = reinterpret_cast<uintptr_t>(V_b);
                    const uintptr_t lo = a0 < b0 ? a0 : b0;
                    const uintptr_t hi_a = a0 + vbytes, hi_b = b0 + vbytes;
                    const uintptr_t hi = hi_a > hi_b ? hi_a : hi_b;
                    if ((size_t)(hi - lo) <= maxw) {
                        wbase = lo;
                        wbytes = (size_t)(hi - lo);
                    }
                }
#endif
                env.win_base = reinterpret_cast<void*>(wbase);
                env.win_bytes = wbytes;
            }
#endif
        }
#endif

        if (elems < (1LL << 31)) {
            launch_all<unsigned int>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, vec, env);
        } else {
            launch_all<unsigned long long>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, vec,
                                           env);
        }
    }
    cudaDeviceSynchronize();
}
