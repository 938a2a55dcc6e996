// merge_attn_states (fp32), round 7: TMA 1-D bulk-copy streaming kernel, shaped tail,
// load-first prologue, .read bulk-store wait, compile-time experiment knobs.
//
// V arrays are token-major [T][H][S] and are treated as one flat array of T*H*S floats.
// LSEs are head-major [H][T] (index h*T + t).
//
// Round 7 (plan items 1-3):
//   * Tail shaping (MERGE_TMA_TAIL, default on): when the classic grid (NT tiles per CTA) would
//     exceed one resident wave, the first n_big CTAs carry NT tiles each and the last
//     ~(occupancy x SMs) CTAs carry one tile each, so the final wave drains in half-size pieces.
//     Tiles are still consecutive TILE-chunk pieces of the flat float4 array; the arithmetic is
//     bit-identical to rounds 4-6.
//   * Prologue: thread 0 initialises the barriers and issues tile 0's two bulk loads before it
//     computes anything for tile 1 (straight-line code).
//   * Bulk-store wait defaults to cp.async.bulk.wait_group.read 0 (CTA exits as soon as shared
//     memory has been read; same as CUTLASS's TMA store tail). -DMERGE_TMA_WAIT_READ=0 restores
//     the full wait.
//   * Launch plans are cached per (T, H, S) in a small multi-entry cache; occupancy and SM count
//     are queried once per kernel instantiation.
//   * Experiment knobs (all default to the production configuration):
//       MERGE_LOAD_HINT   0 none, 1 evict_first (default), 2 evict_normal, 3 evict_last
//       MERGE_STORE_HINT  0 none (default), 1 evict_first, 2 evict_normal, 3 evict_last
//       MERGE_TMA_CTAS_PER_SM  0 natural occupancy (default); k > 0 pads dynamic smem to cap
//                              the TMA kernel at k CTAs/SM
//       MERGE_TMA_MIN_N4  grids with N4 below this use the round-4 register kernel (default 0)
//       MERGE_EXPERIMENT  0 normal (default), 1 empty kernel, 2 loads only, 3 stores only
//                         (1-3 produce wrong outputs: timing experiments only)
//       MERGE_TMA_TRACE   1: per-CTA %globaltimer start/end, smid, tile count written to a
//                         buffer set by merge_attn_states_set_trace() (4 u64 per CTA)
//   * Legacy vec4 (64-bit indices) and scalar (S % 4 != 0 or misaligned) fallbacks unchanged.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#ifndef MERGE_TMA_WAIT_READ
#define MERGE_TMA_WAIT_READ 1
#endif
#ifndef MERGE_TMA_TAIL
#define MERGE_TMA_TAIL 1
#endif
#ifndef MERGE_LOAD_HINT
#define MERGE_LOAD_HINT 1
#endif
#ifndef MERGE_STORE_HINT
#define MERGE_STORE_HINT 0
#endif
#ifndef MERGE_TMA_CTAS_PER_SM
#define MERGE_TMA_CTAS_PER_SM 0
#endif
#ifndef MERGE_TMA_MIN_N4
#define MERGE_TMA_MIN_N4 0
#endif
#ifndef MERGE_EXPERIMENT
#define MERGE_EXPERIMENT 0
#endif
#ifndef MERGE_TMA_TRACE
#define MERGE_TMA_TRACE 0
#endif

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// Legacy streaming load (normal L2 priority), used by the legacy vec4 kernel.
__device__ __forceinline__ float4 ld_stream4(const float4* p) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
    return v;
}

// L2 evict-first cache policy (whole access fraction).
__device__ __forceinline__ uint64_t make_evict_first_policy() {
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

// L2 cache policy selected at compile time: 1 evict_first, 2 evict_normal, 3 evict_last.
template <int kHint>
__device__ __forceinline__ uint64_t make_policy() {
    uint64_t pol;
    if (kHint == 3) {
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    } else if (kHint == 2) {
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
    } else {
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    }
    return pol;
}

// Read-only load, no L1 allocation, L2 evict-first via the cache policy.
__device__ __forceinline__ float4 ld_evict_first4(const float4* p, uint64_t pol) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p), "l"(pol));
    return v;
}

// Plain write-back store, normal L2 priority.
__device__ __forceinline__ void st_plain4(float4* p, const float4& v) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};"
                 :
                 : "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w));
}

// Weights with exactly the baseline's arithmetic (legacy kernels).
__device__ __forceinline__ void merge_weights(float pa, float pb, float& wa, float& wb,
                                              float& m, float& sum) {
    pa = isinf(pa) ? -FLT_MAX : pa;
    pb = isinf(pb) ? -FLT_MAX : pb;
    m = fmaxf(pa, pb);
    const float ea = expf(pa - m);
    const float eb = expf(pb - m);
    sum = ea + eb;
    wa = ea / sum;
    wb = eb / sum;
}

// Single-exp weights (tuned kernels). The larger weight, m, sum and the LSE are identical to
// merge_weights; the smaller weight is e * (1/sum) instead of e / sum (<= ~1 ulp apart).
// Both infinite: pa = pb = -FLT_MAX -> e = 1, sum = 2, weights 0.5, LSE = log(2) - FLT_MAX.
__device__ __forceinline__ void merge_weights_1exp(float pa, float pb, float& wa, float& wb,
                                                   float& m, float& sum) {
    pa = isinf(pa) ? -FLT_MAX : pa;
    pb = isinf(pb) ? -FLT_MAX : pb;
    m = fmaxf(pa, pb);
    const float e = expf(-fabsf(pa - pb));
    sum = 1.0f + e;
    const float inv = 1.0f / sum;
    const float ws = e * inv;
    const bool a_big = pa >= pb;
    wa = a_big ? inv : ws;
    wb = a_big ? ws : inv;
}

// Round-up magic-multiplier division, valid for every dividend n < 2^31 and divisor d >= 2:
// L = ceil(log2 d), p = 31 + L, mul = ceil(2^p / d) (< 2^32), shr = p - 32,
// q = umulhi(n, mul) >> shr. For d == 1 the kernel template uses the identity instead.
struct FastDiv {
    uint32_t mul;
    uint32_t shr;
    uint32_t is_one;
};

template <bool kOne>
__device__ __forceinline__ uint32_t fast_div(uint32_t n, uint32_t mul, uint32_t shr) {
    if (kOne) return n;
    return __umulhi(n, mul) >> shr;
}

// =============================================================================================
// TMA / mbarrier PTX wrappers
// =============================================================================================
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

// 1-D bulk copy global -> shared, completion on the mbarrier (tx bytes), L2 cache hint.
__device__ __forceinline__ void bulk_g2s_hint(uint32_t dst, const void* src, uint32_t bytes,
                                              uint32_t bar, uint64_t pol) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar), "l"(pol)
        : "memory");
}

// 1-D bulk copy global -> shared, completion on the mbarrier (tx bytes), no cache hint.
__device__ __forceinline__ void bulk_g2s_plain(uint32_t dst, const void* src, uint32_t bytes,
                                               uint32_t bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1], %2, [%3];" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0u;
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// 1-D bulk copy shared -> global, bulk-group completion.
__device__ __forceinline__ void bulk_s2g_plain(void* dst, uint32_t src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
}

// 1-D bulk copy shared -> global, bulk-group completion, L2 cache hint.
__device__ __forceinline__ void bulk_s2g_hint(void* dst, uint32_t src, uint32_t bytes,
                                              uint64_t pol) {
    asm volatile(
        "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;" ::"l"(
            dst),
        "r"(src), "r"(bytes), "l"(pol)
        : "memory");
}

__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

__device__ __forceinline__ void bulk_wait_all() {
#if MERGE_TMA_WAIT_READ
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#else
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

#if MERGE_TMA_TRACE
// Experiment builds only: per-CTA trace, 4 x u64 per CTA: start, end, smid, tiles.
__device__ unsigned long long* g_merge_trace = nullptr;

__device__ __forceinline__ unsigned long long global_timer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint32_t sm_id() {
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

__device__ __forceinline__ void trace_record(uint32_t bid, unsigned long long t0,
                                             uint32_t ntiles) {
    unsigned long long* tr = g_merge_trace;
    if (tr != nullptr) {
        const size_t o = (size_t)bid * 4u;
        tr[o + 0] = t0;
        tr[o + 1] = global_timer();
        tr[o + 2] = (unsigned long long)sm_id();
        tr[o + 3] = (unsigned long long)ntiles;
    }
}
#endif

// =============================================================================================
// TMA kernel (tuned 32-bit path)
// =============================================================================================

// Valid float4 chunks of tile j of a CTA (0 past the CTA's tile count or past the end).
template <int TILE>
__device__ __forceinline__ uint32_t tile_count(uint32_t cta_base, int j, uint32_t ntiles,
                                               uint32_t N4) {
    if ((uint32_t)j >= ntiles) return 0u;
    const uint32_t tb = cta_base + (uint32_t)(j * TILE);
    const uint32_t rem = tb < N4 ? N4 - tb : 0u;
    return rem < (uint32_t)TILE ? rem : (uint32_t)TILE;
}

// CTA b < n_big owns NT consecutive tiles starting at tile b*NT; CTA b >= n_big owns the single
// tile n_big*NT + (b - n_big). With n_big == gridDim.x this is the classic layout.
template <int TPB, int TILE, int NT, int MINB, bool kS4One, bool kHOne>
__global__ void __launch_bounds__(TPB, MINB)
merge_tma_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                 const float* __restrict__ V_a, const float* __restrict__ lse_a,
                 const float* __restrict__ V_b, const float* __restrict__ lse_b, uint32_t T,
                 uint32_t H, uint32_t S4, uint32_t N4, uint32_t mul_s4, uint32_t shr_s4,
                 uint32_t mul_h, uint32_t shr_h, uint32_t n_big) {
    static_assert(TILE % TPB == 0, "TILE must be a multiple of TPB");
    static_assert((size_t)NT * TILE * 16 * 2 <= 48 * 1024, "static shared memory limit");
    constexpr int C = TILE / TPB;  // chunks per thread per tile
    constexpr int kMode = MERGE_EXPERIMENT;

    __shared__ __align__(128) float4 sA[NT][TILE];
    __shared__ __align__(128) float4 sB[NT][TILE];
    __shared__ __align__(8) uint64_t sBar[NT];

    const uint32_t tid = threadIdx.x;
    const uint32_t bid = blockIdx.x;
    const bool big = bid < n_big;
    const uint32_t cta_base =
        big ? bid * (uint32_t)(NT * TILE)
            : n_big * (uint32_t)(NT * TILE) + (bid - n_big) * (uint32_t)TILE;
    const uint32_t ntiles = big ? (uint32_t)NT : 1u;

#if MERGE_TMA_TRACE
    unsigned long long trace_t0 = 0ull;
    if (tid == 0) trace_t0 = global_timer();
#endif

    if (kMode == 1) {  // experiment: empty kernel
#if MERGE_TMA_TRACE
        if (tid == 0) trace_record(bid, trace_t0, ntiles);
#endif
        return;
    }

    const float4* a4 = reinterpret_cast<const float4*>(V_a);
    const float4* b4 = reinterpret_cast<const float4*>(V_b);
    float4* o4 = reinterpret_cast<float4*>(V_out);

    // Thread 0: barrier setup, then tile 0's loads first, then the others (straight-line code).
    if (tid == 0) {
#pragma unroll
        for (int j = 0; j < NT; ++j) mbar_init(smem_u32(&sBar[j]), 1u);
        fence_mbar_init();
        fence_proxy_async_smem();
        if (kMode != 3) {
#if MERGE_LOAD_HINT != 0
            const uint64_t pol = make_policy<MERGE_LOAD_HINT>();
#endif
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint32_t n = tile_count<TILE>(cta_base, j, ntiles, N4);
                if (n != 0u) {
                    const uint32_t tb = cta_base + (uint32_t)(j * TILE);
                    const uint32_t bar = smem_u32(&sBar[j]);
                    const uint32_t bytes = n * 16u;
                    mbar_arrive_expect_tx(bar, 2u * bytes);
#if MERGE_LOAD_HINT != 0
                    bulk_g2s_hint(smem_u32(&sA[j][0]), a4 + tb, bytes, bar, pol);
                    bulk_g2s_hint(smem_u32(&sB[j][0]), b4 + tb, bytes, bar, pol);
#else
                    bulk_g2s_plain(smem_u32(&sA[j][0]), a4 + tb, bytes, bar);
                    bulk_g2s_plain(smem_u32(&sB[j][0]), b4 + tb, bytes, bar);
#endif
                }
            }
        }
    }

    // Valid chunks per tile (0 for a tile the CTA does not own; never increases with j).
    uint32_t cnt[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) cnt[j] = tile_count<TILE>(cta_base, j, ntiles, N4);

    // While the copies fly: row / LSE index and LSE loads for every chunk of this thread.
    float pa[NT][C], pb[NT][C];
    uint32_t li[NT][C];
    bool first[NT][C];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        const uint32_t tb = cta_base + (uint32_t)(j * TILE);
#pragma unroll
        for (int k = 0; k < C; ++k) {
            const uint32_t c = (uint32_t)(k * TPB) + tid;
            pa[j][k] = 0.f;
            pb[j][k] = 0.f;
            li[j][k] = 0u;
            first[j][k] = false;
            if (c < cnt[j]) {
                const uint32_t idx = tb + c;
                const uint32_t r = fast_div<kS4One>(idx, mul_s4, shr_s4);  // row = t*H + h
                const uint32_t t = fast_div<kHOne>(r, mul_h, shr_h);
                const uint32_t h = r - t * H;
                li[j][k] = h * T + t;
                first[j][k] = (idx == r * S4);  // this chunk starts at s == 0
                pa[j][k] = __ldg(lse_a + li[j][k]);
                pb[j][k] = __ldg(lse_b + li[j][k]);
            }
        }
    }

    // Weights and LSE_out (exactly once per row).
    float wa[NT][C], wb[NT][C];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int k = 0; k < C; ++k) {
            const uint32_t c = (uint32_t)(k * TPB) + tid;
            wa[j][k] = 0.f;
            wb[j][k] = 0.f;
            if (c < cnt[j]) {
                float m, sum;
                merge_weights_1exp(pa[j][k], pb[j][k], wa[j][k], wb[j][k], m, sum);
                if (LSE_out != nullptr && first[j][k]) {
                    LSE_out[li[j][k]] = logf(sum) + m;
                }
            }
        }
    }

    // Makes the mbarrier initialisation visible to every thread before anyone waits on it.
    __syncthreads();

#pragma unroll
    for (int j = 0; j < NT; ++j) {
        if (cnt[j] == 0u) break;  // uniform across the CTA
        if (kMode != 3) mbar_wait(smem_u32(&sBar[j]), 0u);
        if (kMode == 2) continue;  // experiment: loads only
#pragma unroll
        for (int k = 0; k < C; ++k) {
            const uint32_t c = (uint32_t)(k * TPB) + tid;
            if (c < cnt[j]) {
                float4 o;
                if (kMode == 3) {  // experiment: stores only
                    o = make_float4(wa[j][k], wb[j][k], wa[j][k], wb[j][k]);
                } else {
                    const float4 a = sA[j][c];
                    const float4 b = sB[j][c];
                    o.x = a.x * wa[j][k] + b.x * wb[j][k];
                    o.y = a.y * wa[j][k] + b.y * wb[j][k];
                    o.z = a.z * wa[j][k] + b.z * wb[j][k];
                    o.w = a.w * wa[j][k] + b.w * wb[j][k];
                }
                sA[j][c] = o;
            }
        }
        fence_proxy_async_smem();  // generic-proxy smem writes -> visible to the bulk store
        __syncthreads();
        if (tid == 0) {
            const uint32_t tb = cta_base + (uint32_t)(j * TILE);
#if MERGE_STORE_HINT != 0
            bulk_s2g_hint(o4 + tb, smem_u32(&sA[j][0]), cnt[j] * 16u,
                          make_policy<MERGE_STORE_HINT>());
#else
            bulk_s2g_plain(o4 + tb, smem_u32(&sA[j][0]), cnt[j] * 16u);
#endif
            bulk_commit();
        }
    }

    // Shared memory must stay valid until the bulk stores have read it.
    if (tid == 0) {
        bulk_wait_all();
#if MERGE_TMA_TRACE
        trace_record(bid, trace_t0, ntiles);
#endif
    }
}

// =============================================================================================
// Round-4 register kernel (kept; selectable for small grids through kTmaMinN4)
// =============================================================================================
template <int TPB, int U, bool kFull, bool kS4One, bool kHOne>
__device__ __forceinline__ void tuned_body(float* __restrict__ V_out,
                                           float* __restrict__ LSE_out,
                                           const float* __restrict__ V_a,
                                           const float* __restrict__ lse_a,
                                           const float* __restrict__ V_b,
                                           const float* __restrict__ lse_b, uint32_t T,
                                           uint32_t H, uint32_t S4, uint32_t N4,
                                           uint32_t mul_s4, uint32_t shr_s4, uint32_t mul_h,
                                           uint32_t shr_h, uint32_t base) {
    const float4* __restrict__ a4 = reinterpret_cast<const float4*>(V_a);
    const float4* __restrict__ b4 = reinterpret_cast<const float4*>(V_b);
    float4* __restrict__ o4 = reinterpret_cast<float4*>(V_out);

    const uint64_t pol = make_evict_first_policy();

    float4 va[U], vb[U];
    uint32_t idx[U];

#pragma unroll
    for (int k = 0; k < U; ++k) {
        idx[k] = base + (uint32_t)(k * TPB);
        va[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        vb[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (kFull || idx[k] < N4) {
            va[k] = ld_evict_first4(a4 + idx[k], pol);
            vb[k] = ld_evict_first4(b4 + idx[k], pol);
        }
    }

    float pa[U], pb[U];
    uint32_t li[U];
    bool first[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
        pa[k] = 0.f;
        pb[k] = 0.f;
        li[k] = 0;
        first[k] = false;
        if (kFull || idx[k] < N4) {
            const uint32_t r = fast_div<kS4One>(idx[k], mul_s4, shr_s4);
            const uint32_t t = fast_div<kHOne>(r, mul_h, shr_h);
            const uint32_t h = r - t * H;
            li[k] = h * T + t;
            first[k] = (idx[k] == r * S4);
            pa[k] = __ldg(lse_a + li[k]);
            pb[k] = __ldg(lse_b + li[k]);
        }
    }

    float wa[U], wb[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
        wa[k] = 0.f;
        wb[k] = 0.f;
        if (kFull || idx[k] < N4) {
            float m, sum;
            merge_weights_1exp(pa[k], pb[k], wa[k], wb[k], m, sum);
            if (LSE_out != nullptr && first[k]) {
                LSE_out[li[k]] = logf(sum) + m;
            }
        }
    }

#pragma unroll
    for (int k = 0; k < U; ++k) {
        if (kFull || idx[k] < N4) {
            float4 o;
            o.x = va[k].x * wa[k] + vb[k].x * wb[k];
            o.y = va[k].y * wa[k] + vb[k].y * wb[k];
            o.z = va[k].z * wa[k] + vb[k].z * wb[k];
            o.w = va[k].w * wa[k] + vb[k].w * wb[k];
            st_plain4(o4 + idx[k], o);
        }
    }
}

template <int TPB, int U, int MINB, bool kS4One, bool kHOne>
__global__ void __launch_bounds__(TPB, MINB)
merge_tuned_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                   const float* __restrict__ V_a, const float* __restrict__ lse_a,
                   const float* __restrict__ V_b, const float* __restrict__ lse_b, uint32_t T,
                   uint32_t H, uint32_t S4, uint32_t N4, uint32_t mul_s4, uint32_t shr_s4,
                   uint32_t mul_h, uint32_t shr_h) {
    const uint32_t block_base = (uint32_t)blockIdx.x * (uint32_t)(TPB * U);
    const uint32_t base = block_base + (uint32_t)threadIdx.x;
    if (block_base + (uint32_t)(TPB * U) <= N4) {
        tuned_body<TPB, U, true, kS4One, kHOne>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H,
                                                S4, N4, mul_s4, shr_s4, mul_h, shr_h, base);
    } else {
        tuned_body<TPB, U, false, kS4One, kHOne>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H,
                                                 S4, N4, mul_s4, shr_s4, mul_h, shr_h, base);
    }
}

// =============================================================================================
// Legacy vectorised body (64-bit path; unchanged)
// =============================================================================================
template <bool kFull, typename I>
__device__ __forceinline__ void vec4_body(float* __restrict__ V_out, float* __restrict__ LSE_out,
                                          const float* __restrict__ V_a,
                                          const float* __restrict__ lse_a,
                                          const float* __restrict__ V_b,
                                          const float* __restrict__ lse_b, I T, I H, I S4, I N4,
                                          I base) {
    const float4* __restrict__ a4 = reinterpret_cast<const float4*>(V_a);
    const float4* __restrict__ b4 = reinterpret_cast<const float4*>(V_b);
    float4* __restrict__ o4 = reinterpret_cast<float4*>(V_out);

    float4 va[kUnroll], vb[kUnroll];
    float pa[kUnroll], pb[kUnroll];
    I idx[kUnroll], row[kUnroll], li[kUnroll];

#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
        idx[k] = base + (I)(k * kThreads);
        va[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        vb[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        pa[k] = 0.f;
        pb[k] = 0.f;
        row[k] = 0;
        li[k] = 0;
        if (kFull || idx[k] < N4) {
            va[k] = ld_stream4(a4 + idx[k]);
            vb[k] = ld_stream4(b4 + idx[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
        if (kFull || idx[k] < N4) {
            const I r = idx[k] / S4;
            const I t = r / H;
            const I h = r - t * H;
            row[k] = r;
            li[k] = h * T + t;
            pa[k] = __ldg(lse_a + li[k]);
            pb[k] = __ldg(lse_b + li[k]);
        }
    }

#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
        if (kFull || idx[k] < N4) {
            float wa, wb, m, sum;
            merge_weights(pa[k], pb[k], wa, wb, m, sum);
            float4 o;
            o.x = va[k].x * wa + vb[k].x * wb;
            o.y = va[k].y * wa + vb[k].y * wb;
            o.z = va[k].z * wa + vb[k].z * wb;
            o.w = va[k].w * wa + vb[k].w * wb;
            __stcs(o4 + idx[k], o);
            if (LSE_out != nullptr && idx[k] == row[k] * S4) {
                LSE_out[li[k]] = logf(sum) + m;
            }
        }
    }
}

template <typename I>
__global__ void __launch_bounds__(kThreads)
merge_vec4_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                  const float* __restrict__ V_a, const float* __restrict__ lse_a,
                  const float* __restrict__ V_b, const float* __restrict__ lse_b, I T, I H, I S4,
                  I N4) {
    const I block_base = (I)blockIdx.x * (I)(kThreads * kUnroll);
    const I base = block_base + (I)threadIdx.x;
    if (block_base + (I)(kThreads * kUnroll) <= N4) {
        vec4_body<true, I>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S4, N4, base);
    } else {
        vec4_body<false, I>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S4, N4, base);
    }
}

// =============================================================================================
// Scalar fallback body (unchanged)
// =============================================================================================
template <bool kFull, typename I>
__device__ __forceinline__ void scalar_body(float* __restrict__ V_out,
                                            float* __restrict__ LSE_out,
                                            const float* __restrict__ V_a,
                                            const float* __restrict__ lse_a,
                                            const float* __restrict__ V_b,
                                            const float* __restrict__ lse_b, I T, I H, I S, I N,
                                            I base) {
    float va[kUnroll], vb[kUnroll];
    float pa[kUnroll], pb[kUnroll];
    I idx[kUnroll], row[kUnroll], li[kUnroll];

#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
        idx[k] = base + (I)(k * kThreads);
        va[k] = 0.f;
        vb[k] = 0.f;
        pa[k] = 0.f;
        pb[k] = 0.f;
        row[k] = 0;
        li[k] = 0;
        if (kFull || idx[k] < N) {
            va[k] = __ldcs(V_a + idx[k]);
            vb[k] = __ldcs(V_b + idx[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
        if (kFull || idx[k] < N) {
            const I r = idx[k] / S;
            const I t = r / H;
            const I h = r - t * H;
            row[k] = r;
            li[k] = h * T + t;
            pa[k] = __ldg(lse_a + li[k]);
            pb[k] = __ldg(lse_b + li[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
        if (kFull || idx[k] < N) {
            float wa, wb, m, sum;
            merge_weights(pa[k], pb[k], wa, wb, m, sum);
            __stcs(V_out + idx[k], va[k] * wa + vb[k] * wb);
            if (LSE_out != nullptr && idx[k] == row[k] * S) {
                LSE_out[li[k]] = logf(sum) + m;
            }
        }
    }
}

template <typename I>
__global__ void __launch_bounds__(kThreads)
merge_scalar_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                    const float* __restrict__ V_a, const float* __restrict__ lse_a,
                    const float* __restrict__ V_b, const float* __restrict__ lse_b, I T, I H, I S,
                    I N) {
    const I block_base = (I)blockIdx.x * (I)(kThreads * kUnroll);
    const I base = block_base + (I)threadIdx.x;
    if (block_base + (I)(kThreads * kUnroll) <= N) {
        scalar_body<true, I>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, N, base);
    } else {
        scalar_body<false, I>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, N, base);
    }
}

// =============================================================================================
// Host helpers
// =============================================================================================
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

inline FastDiv make_fast_div(uint32_t d) {
    FastDiv f;
    if (d <= 1u) {
        f.mul = 0u;
        f.shr = 0u;
        f.is_one = 1u;
        return f;
    }
    uint32_t L = 0;
    while ((1ull << L) < (uint64_t)d) ++L;  // L = ceil(log2 d), 1..31
    const uint32_t p = 31u + L;             // 32..62
    f.mul = (uint32_t)(((1ull << p) + (uint64_t)d - 1ull) / (uint64_t)d);
    f.shr = p - 32u;
    f.is_one = 0u;
    return f;
}

inline uint32_t host_fast_div(uint32_t n, const FastDiv& f) {
    if (f.is_one) return n;
    return (uint32_t)(((uint64_t)n * (uint64_t)f.mul) >> 32) >> f.shr;
}

// Spot check of the magic divider against exact division on [0, nmax]; run once per shape.
inline bool fast_div_ok(uint32_t d, const FastDiv& f, uint32_t nmax) {
    if (d == 0u) return false;
    if (f.is_one != (d == 1u ? 1u : 0u)) return false;
    const uint32_t top = nmax - nmax % d;  // largest multiple of d <= nmax
    const uint32_t tests[] = {0u,        1u,        d - 1u,    d,      d + 1u,
                              2u * d - 1u, 2u * d,  nmax,      nmax - 1u, top,
                              top - 1u,  nmax / 2u, nmax / 3u, 12345u, 1000003u};
    for (uint32_t n : tests) {
        if (n > nmax) continue;
        if (host_fast_div(n, f) != n / d) return false;
    }
    return true;
}

// TMA kernel shape.
constexpr int kTmaTPB = 256;
constexpr int kTmaTile = 512;  // float4 chunks per tile (8 KB per input)
constexpr int kTmaNT = 2;      // tiles per CTA (32 KB static shared memory)
constexpr int kTmaMinB = 6;    // 6 CTAs/SM (shared-memory bound)
// Grids with N4 below this use the round-4 register kernel instead (0: TMA everywhere).
constexpr uint32_t kTmaMinN4 = (uint32_t)(MERGE_TMA_MIN_N4);

// Round-4 register kernel shape.
constexpr int kTunedTPB = 256;
constexpr int kTunedU = 4;
constexpr int kTunedMinB = 4;

constexpr uint32_t kTunedMaxN4 = 0x7FFF0000u;  // every computed index stays < 2^31

inline int device_sm_count() {
    static int sms = -1;
    if (sms < 0) {
        int dev = 0;
        int n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
            n = 0;
        }
        (void)cudaGetLastError();
        sms = n;
    }
    return sms;
}

struct TmaKernelInfo {
    bool ready;
    int dyn_smem;  // dynamic shared memory padding (experiment CTAs/SM cap; 0 by default)
    int occ;       // resident CTAs per SM (0 if unknown)
};

template <bool kS4One, bool kHOne>
inline const TmaKernelInfo& tma_kernel_info() {
    static TmaKernelInfo info = {false, 0, 0};
    if (!info.ready) {
        auto kern = merge_tma_kernel<kTmaTPB, kTmaTile, kTmaNT, kTmaMinB, kS4One, kHOne>;
        cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        (void)cudaGetLastError();  // a hint only; ignore a refusal
        int dyn = 0;
#if MERGE_TMA_CTAS_PER_SM > 0
        {
            int dev = 0, smem_sm = 0, reserved = 0, optin = 0;
            cudaFuncAttributes fa;
            if (cudaGetDevice(&dev) == cudaSuccess &&
                cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                       dev) == cudaSuccess &&
                cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock,
                                       dev) == cudaSuccess &&
                cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) ==
                    cudaSuccess &&
                cudaFuncGetAttributes(&fa, kern) == cudaSuccess) {
                const int per = smem_sm / (int)(MERGE_TMA_CTAS_PER_SM);
                dyn = per - reserved - (int)fa.sharedSizeBytes - 256;
                const int cap = optin - (int)fa.sharedSizeBytes;
                if (dyn > cap) dyn = cap;
                if (dyn < 0) dyn = 0;
                if (dyn > 0 && cudaFuncSetAttribute(kern,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    dyn) != cudaSuccess) {
                    dyn = 0;
                }
            }
            (void)cudaGetLastError();
        }
#endif
        int occ = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, kTmaTPB, (size_t)dyn) !=
            cudaSuccess) {
            occ = 0;
        }
        (void)cudaGetLastError();
        info.dyn_smem = dyn;
        info.occ = occ;
        info.ready = true;
    }
    return info;
}

inline const TmaKernelInfo& get_tma_info(bool s_one, bool h_one) {
    if (!s_one && !h_one) return tma_kernel_info<false, false>();
    if (!s_one && h_one) return tma_kernel_info<false, true>();
    if (s_one && !h_one) return tma_kernel_info<true, false>();
    return tma_kernel_info<true, true>();
}

struct LaunchPlan {
    int T, H, S;      // cache key
    bool filled;
    bool tuned;       // 32-bit magic-divisor path usable (given aligned pointers)
    bool use_tma;
    bool s_one, h_one;
    uint32_t t32, h32, s4, n4;
    uint32_t blocks;
    uint32_t n_big;   // TMA: CTAs carrying kTmaNT tiles (the rest carry one)
    int dyn_smem;     // TMA: dynamic shared memory at launch
    FastDiv ds4, dh;
};

constexpr int kPlanSlots = 8;

inline LaunchPlan compute_plan(int num_tokens, int num_heads, int head_size) {
    LaunchPlan q = {};
    q.T = num_tokens;
    q.H = num_heads;
    q.S = head_size;
    q.filled = true;
    q.tuned = false;
    q.use_tma = false;
    q.n_big = 0u;
    q.dyn_smem = 0;
    if (head_size % 4 == 0) {
        const uint64_t T = (uint64_t)num_tokens;
        const uint64_t H = (uint64_t)num_heads;
        const uint64_t S = (uint64_t)head_size;
        const uint64_t N4 = (T * H * S) / 4;
        const uint64_t S4 = S / 4;
        if (N4 >= 1ull && N4 <= (uint64_t)kTunedMaxN4) {
            const FastDiv ds4 = make_fast_div((uint32_t)S4);
            const FastDiv dh = make_fast_div((uint32_t)H);
            if (fast_div_ok((uint32_t)S4, ds4, (uint32_t)(N4 - 1ull)) &&
                fast_div_ok((uint32_t)H, dh, (uint32_t)(T * H - 1ull))) {
                q.tuned = true;
                q.ds4 = ds4;
                q.dh = dh;
                q.s_one = ds4.is_one != 0u;
                q.h_one = dh.is_one != 0u;
                q.t32 = (uint32_t)T;
                q.h32 = (uint32_t)H;
                q.s4 = (uint32_t)S4;
                q.n4 = (uint32_t)N4;
                q.use_tma = q.n4 >= kTmaMinN4;
                if (q.use_tma) {
                    const TmaKernelInfo& info = get_tma_info(q.s_one, q.h_one);
                    q.dyn_smem = info.dyn_smem;
                    const uint32_t tiles = (q.n4 + (uint32_t)kTmaTile - 1u) / (uint32_t)kTmaTile;
                    uint32_t n_big = (tiles + (uint32_t)kTmaNT - 1u) / (uint32_t)kTmaNT;
                    uint32_t blocks = n_big;  // classic layout: every CTA takes kTmaNT tiles
#if MERGE_TMA_TAIL
                    const uint64_t R = (uint64_t)(info.occ > 0 ? info.occ : 0) *
                                       (uint64_t)(device_sm_count() > 0 ? device_sm_count() : 0);
                    if (kTmaNT > 1 && R > 0ull && (uint64_t)tiles > (uint64_t)kTmaNT * R) {
                        // Shaped tail: the last ~R CTAs (one resident wave) take one tile each.
                        n_big = (uint32_t)(((uint64_t)tiles - R) / (uint64_t)kTmaNT);
                        blocks = n_big + (tiles - n_big * (uint32_t)kTmaNT);
                    }
#endif
                    q.n_big = n_big;
                    q.blocks = blocks;
                } else {
                    const uint32_t per = (uint32_t)(kTunedTPB * kTunedU);
                    q.blocks = (q.n4 + per - 1u) / per;
                }
            }
        }
    }
    return q;
}

inline const LaunchPlan& get_plan(int num_tokens, int num_heads, int head_size) {
    static LaunchPlan cache[kPlanSlots] = {};
    static int next = 0;
    for (int i = 0; i < kPlanSlots; ++i) {
        const LaunchPlan& c = cache[i];
        if (c.filled && c.T == num_tokens && c.H == num_heads && c.S == head_size) return c;
    }
    LaunchPlan& slot = cache[next];
    next = (next + 1) % kPlanSlots;
    slot = compute_plan(num_tokens, num_heads, head_size);
    return slot;
}

template <bool kS4One, bool kHOne>
inline void launch_plan(const LaunchPlan& p, float* V_out, float* LSE_out, const float* V_a,
                        const float* lse_a, const float* V_b, const float* lse_b) {
    if (p.use_tma) {
        merge_tma_kernel<kTmaTPB, kTmaTile, kTmaNT, kTmaMinB, kS4One, kHOne>
            <<<p.blocks, kTmaTPB, (size_t)p.dyn_smem>>>(V_out, LSE_out, V_a, lse_a, V_b, lse_b,
                                                        p.t32, p.h32, p.s4, p.n4, p.ds4.mul,
                                                        p.ds4.shr, p.dh.mul, p.dh.shr, p.n_big);
    } else {
        merge_tuned_kernel<kTunedTPB, kTunedU, kTunedMinB, kS4One, kHOne>
            <<<p.blocks, kTunedTPB>>>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, p.t32, p.h32,
                                      p.s4, p.n4, p.ds4.mul, p.ds4.shr, p.dh.mul, p.dh.shr);
    }
}

}  // namespace

#if MERGE_TMA_TRACE
// Experiment builds only: set the per-CTA trace buffer (device pointer, >= 4 * grid u64).
extern "C" void merge_attn_states_set_trace(unsigned long long* buf) {
    cudaMemcpyToSymbol(g_merge_trace, &buf, sizeof(buf));
    cudaDeviceSynchronize();
}
#endif

extern "C" void merge_attn_states(float* V_out, float* LSE_out, const float* V_a,
                                  const float* lse_a, const float* V_b, const float* lse_b,
                                  int num_tokens, int num_heads, int head_size) {
    if (num_tokens > 0 && num_heads > 0 && head_size > 0) {
        const bool vec = (head_size % 4 == 0) && aligned16(V_out) && aligned16(V_a) &&
                         aligned16(V_b);
        const LaunchPlan& p = get_plan(num_tokens, num_heads, head_size);

        if (vec && p.tuned) {
            if (!p.s_one && !p.h_one) {
                launch_plan<false, false>(p, V_out, LSE_out, V_a, lse_a, V_b, lse_b);
            } else if (!p.s_one && p.h_one) {
                launch_plan<false, true>(p, V_out, LSE_out, V_a, lse_a, V_b, lse_b);
            } else if (p.s_one && !p.h_one) {
                launch_plan<true, false>(p, V_out, LSE_out, V_a, lse_a, V_b, lse_b);
            } else {
                launch_plan<true, true>(p, V_out, LSE_out, V_a, lse_a, V_b, lse_b);
            }
        } else {
            const uint64_t T = (uint64_t)num_tokens;
            const uint64_t H = (uint64_t)num_heads;
            const uint64_t S = (uint64_t)head_size;
            const uint64_t N = T * H * S;
            const uint64_t per_block = (uint64_t)kThreads * kUnroll;
            const uint64_t lim32 = 0xFFFFFFFFull;
            if (vec) {
                // Legacy vec4 path (unchanged).
                const uint64_t N4 = N / 4;
                const uint64_t S4 = S / 4;
                const uint64_t blocks = (N4 + per_block - 1) / per_block;
                if (N4 + per_block <= lim32 && N <= lim32) {
                    merge_vec4_kernel<uint32_t><<<(unsigned)blocks, kThreads>>>(
                        V_out, LSE_out, V_a, lse_a, V_b, lse_b, (uint32_t)T, (uint32_t)H,
                        (uint32_t)S4, (uint32_t)N4);
                } else {
                    merge_vec4_kernel<unsigned long long><<<(unsigned)blocks, kThreads>>>(
                        V_out, LSE_out, V_a, lse_a, V_b, lse_b, (unsigned long long)T,
                        (unsigned long long)H, (unsigned long long)S4, (unsigned long long)N4);
                }
            } else {
                // Scalar fallback (unchanged).
                const uint64_t blocks = (N + per_block - 1) / per_block;
                if (N + per_block <= lim32) {
                    merge_scalar_kernel<uint32_t><<<(unsigned)blocks, kThreads>>>(
                        V_out, LSE_out, V_a, lse_a, V_b, lse_b, (uint32_t)T, (uint32_t)H,
                        (uint32_t)S, (uint32_t)N);
                } else {
                    merge_scalar_kernel<unsigned long long><<<(unsigned)blocks, kThreads>>>(
                        V_out, LSE_out, V_a, lse_a, V_b, lse_b, (unsigned long long)T,
                        (unsigned long long)H, (unsigned long long)S, (unsigned long long)N);
                }
            }
        }
    }
    cudaDeviceSynchronize();
}
