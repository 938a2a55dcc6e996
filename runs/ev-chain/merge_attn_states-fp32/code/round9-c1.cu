// merge_attn_states (fp32), round 9: TMA 1-D bulk-copy streaming kernel with a light tail
// and, for one-wave grids, per-warp store hand-off.
//
// V arrays are token-major [T][H][S] and are treated as one flat array of T*H*S floats.
// LSEs are head-major [H][T] (index h*T + t).
//
// Round 9 changes (plan items 1-3):
//   * Item 1: `cp.async.bulk.wait_group.read 0` is the default (MERGE_TMA_WAIT_READ=1): a CTA
//     frees its slot once the TMA unit has read its shared memory.
//     Large grids (N4 > one wave = SMs * CTAs/SM * 1024 chunks) keep round 6's shape
//     (256 threads, 2 tiles of 512 float4, one CTA-wide bulk store per tile), but the CTAs
//     covering the last wave's worth of chunks are "light": two half tiles (2 x 256 float4)
//     each. Same flat chunk indexing; per-CTA start/length computed from blockIdx.
//   * Item 2: grids of at most one wave use 4 tiles of 256 float4 (same 32 KB of shared memory,
//     same bytes in flight), each tile on its own mbarrier, and no CTA-wide barrier per tile:
//     each warp merges its own contiguous 32-chunk segment, fences, __syncwarp()s, and its
//     lane 0 issues that segment's bulk store (512 B) and later waits for its own groups.
//   * Item 3: merge_weights_1exp bit-identical; per-row LSE_out write (chunk with s == 0)
//     unchanged; cnt == 0 tiles / partial tiles valid; scalar and 64-bit fallbacks unchanged.
//     (The unused round-4 register kernel has been removed; it was never selected.)
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#ifndef MERGE_TMA_WAIT_READ
#define MERGE_TMA_WAIT_READ 1
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
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar, uint64_t pol) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar), "l"(pol)
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
__device__ __forceinline__ void bulk_s2g(void* dst, uint32_t src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(src), "r"(bytes)
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

// =============================================================================================
// TMA kernel (tuned 32-bit path)
//
// CTAs [0, heavy_ctas) each own NT tiles of TILE chunks starting at blockIdx * NT * TILE.
// CTAs [heavy_ctas, grid) are light: NT tiles of TILE/2 chunks each, starting right after the
// heavy region. kWarpStore selects per-warp store hand-off instead of one CTA-wide store.
// =============================================================================================
template <int TPB, int TILE, int NT, int MINB, bool kWarpStore, bool kS4One, bool kHOne>
__global__ void __launch_bounds__(TPB, MINB)
merge_tma_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                 const float* __restrict__ V_a, const float* __restrict__ lse_a,
                 const float* __restrict__ V_b, const float* __restrict__ lse_b, uint32_t T,
                 uint32_t H, uint32_t S4, uint32_t N4, uint32_t mul_s4, uint32_t shr_s4,
                 uint32_t mul_h, uint32_t shr_h, uint32_t heavy_ctas) {
    static_assert(TILE % TPB == 0, "TILE must be a multiple of TPB");
    static_assert(TPB % 32 == 0, "TPB must be a multiple of the warp size");
    static_assert(TILE % 2 == 0, "TILE must be even");
    static_assert((size_t)NT * TILE * 16 * 2 <= 48 * 1024, "static shared memory limit");
    constexpr int C = TILE / TPB;  // chunks per thread per tile (at most)
    constexpr uint32_t kHeavyPer = (uint32_t)(NT * TILE);
    constexpr uint32_t kLightTile = (uint32_t)(TILE / 2);
    constexpr uint32_t kLightPer = (uint32_t)NT * kLightTile;

    __shared__ __align__(128) float4 sA[NT][TILE];
    __shared__ __align__(128) float4 sB[NT][TILE];
    __shared__ __align__(8) uint64_t sBar[NT];

    const float4* a4 = reinterpret_cast<const float4*>(V_a);
    const float4* b4 = reinterpret_cast<const float4*>(V_b);
    float4* o4 = reinterpret_cast<float4*>(V_out);

    const uint32_t tid = threadIdx.x;
    const uint32_t bid = blockIdx.x;

    // Per-CTA start and tile length.
    uint32_t cta_base, tile_len;
    if (bid < heavy_ctas) {
        cta_base = bid * kHeavyPer;
        tile_len = (uint32_t)TILE;
    } else {
        cta_base = heavy_ctas * kHeavyPer + (bid - heavy_ctas) * kLightPer;
        tile_len = kLightTile;
    }

    // Valid chunks per tile (0 for a tile past the end; the count never increases with j).
    uint32_t cnt[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        const uint32_t tb = cta_base + (uint32_t)j * tile_len;
        const uint32_t rem = tb < N4 ? N4 - tb : 0u;
        cnt[j] = rem < tile_len ? rem : tile_len;
    }

    // Thread 0: barrier setup and all bulk loads, issued before anything else.
    if (tid == 0) {
#pragma unroll
        for (int j = 0; j < NT; ++j) mbar_init(smem_u32(&sBar[j]), 1u);
        fence_mbar_init();
        fence_proxy_async_smem();
        const uint64_t pol = make_evict_first_policy();
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            if (cnt[j] != 0u) {
                const uint32_t tb = cta_base + (uint32_t)j * tile_len;
                const uint32_t bar = smem_u32(&sBar[j]);
                const uint32_t bytes = cnt[j] * 16u;
                mbar_arrive_expect_tx(bar, 2u * bytes);
                bulk_g2s(smem_u32(&sA[j][0]), a4 + tb, bytes, bar, pol);
                bulk_g2s(smem_u32(&sB[j][0]), b4 + tb, bytes, bar, pol);
            }
        }
    }

    // While the copies fly: row / LSE index and LSE loads for every chunk of this thread.
    float pa[NT][C], pb[NT][C];
    uint32_t li[NT][C];
    bool first[NT][C];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        const uint32_t tb = cta_base + (uint32_t)j * tile_len;
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

    const uint32_t warp = tid >> 5;
    const uint32_t lane = tid & 31u;

#pragma unroll
    for (int j = 0; j < NT; ++j) {
        if (cnt[j] == 0u) break;  // uniform across the CTA
        mbar_wait(smem_u32(&sBar[j]), 0u);
#pragma unroll
        for (int k = 0; k < C; ++k) {
            const uint32_t c = (uint32_t)(k * TPB) + tid;
            if (c < cnt[j]) {
                const float4 a = sA[j][c];
                const float4 b = sB[j][c];
                float4 o;
                o.x = a.x * wa[j][k] + b.x * wb[j][k];
                o.y = a.y * wa[j][k] + b.y * wb[j][k];
                o.z = a.z * wa[j][k] + b.z * wb[j][k];
                o.w = a.w * wa[j][k] + b.w * wb[j][k];
                sA[j][c] = o;
            }
        }
        // Generic-proxy smem writes -> visible to the bulk store (async proxy).
        fence_proxy_async_smem();
        if (kWarpStore) {
            // Each warp owns the contiguous segments [k*TPB + warp*32, +32) of this tile.
            __syncwarp();
            if (lane == 0u) {
                const uint32_t tb = cta_base + (uint32_t)j * tile_len;
                bool issued = false;
#pragma unroll
                for (int k = 0; k < C; ++k) {
                    const uint32_t start = (uint32_t)(k * TPB) + warp * 32u;
                    if (start < cnt[j]) {
                        const uint32_t rem = cnt[j] - start;
                        const uint32_t n = rem < 32u ? rem : 32u;
                        bulk_s2g(o4 + tb + start, smem_u32(&sA[j][start]), n * 16u);
                        issued = true;
                    }
                }
                if (issued) bulk_commit();
            }
        } else {
            __syncthreads();
            if (tid == 0) {
                const uint32_t tb = cta_base + (uint32_t)j * tile_len;
                bulk_s2g(o4 + tb, smem_u32(&sA[j][0]), cnt[j] * 16u);
                bulk_commit();
            }
        }
    }

    // Shared memory must stay valid until the bulk stores have read it; every issuing thread
    // waits for its own bulk groups.
    if (kWarpStore) {
        if (lane == 0u) bulk_wait_all();
    } else {
        if (tid == 0) bulk_wait_all();
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

// TMA kernel shapes (both: 256 threads, 1024 float4 chunks per full CTA, 32 KB static smem).
constexpr int kTmaTPB = 256;
constexpr int kTmaMinB = 6;  // 6 CTAs/SM (shared-memory bound)
// Large grids (> one wave): round 6 shape, light tail CTAs use two half tiles.
constexpr int kLargeTile = 512;
constexpr int kLargeNT = 2;
constexpr uint32_t kLargePer = (uint32_t)(kLargeTile * kLargeNT);             // 1024
constexpr uint32_t kLargeLightPer = (uint32_t)((kLargeTile / 2) * kLargeNT);  // 512
// Small grids (<= one wave): four 4 KB tiles, per-warp store hand-off.
constexpr int kSmallTile = 256;
constexpr int kSmallNT = 4;
constexpr uint32_t kSmallPer = (uint32_t)(kSmallTile * kSmallNT);  // 1024
// Size of the light tail in waves (num / den of one full wave of heavy CTAs).
constexpr uint64_t kLightWaveNum = 1;
constexpr uint64_t kLightWaveDen = 1;

constexpr uint32_t kTunedMaxN4 = 0x7FFF0000u;  // every computed index stays < 2^31

inline int get_num_sms() {
    static int sms = 0;
    if (sms <= 0) {
        int dev = 0;
        int v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            v <= 0) {
            (void)cudaGetLastError();
            v = 132;
        }
        sms = v;
    }
    return sms;
}

// Sets the carveout hint on both TMA variants of this (S4 == 1, H == 1) combination and
// returns the resident CTAs per SM of the large variant.
template <bool kS4One, bool kHOne>
inline int prepare_tma_kernels() {
    cudaFuncSetAttribute(
        merge_tma_kernel<kTmaTPB, kLargeTile, kLargeNT, kTmaMinB, false, kS4One, kHOne>,
        cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared);
    cudaFuncSetAttribute(
        merge_tma_kernel<kTmaTPB, kSmallTile, kSmallNT, kTmaMinB, true, kS4One, kHOne>,
        cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared);
    (void)cudaGetLastError();  // hints only; ignore a refusal
    int bps = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &bps, merge_tma_kernel<kTmaTPB, kLargeTile, kLargeNT, kTmaMinB, false, kS4One, kHOne>,
            kTmaTPB, 0) != cudaSuccess ||
        bps <= 0) {
        (void)cudaGetLastError();
        bps = kTmaMinB;
    }
    if (bps > 32) bps = 32;
    return bps;
}

struct LaunchPlan {
    int T, H, S;  // cache key
    bool filled;
    bool tuned;  // 32-bit magic-divisor path usable (given aligned pointers)
    bool small;  // one-wave grid: per-warp store variant
    bool s_one, h_one;
    uint32_t t32, h32, s4, n4;
    uint32_t blocks;
    uint32_t heavy_ctas;
    FastDiv ds4, dh;
};

inline const LaunchPlan& get_plan(int num_tokens, int num_heads, int head_size) {
    static LaunchPlan cache = {};
    if (cache.filled && cache.T == num_tokens && cache.H == num_heads &&
        cache.S == head_size) {
        return cache;
    }
    LaunchPlan q = {};
    q.T = num_tokens;
    q.H = num_heads;
    q.S = head_size;
    q.filled = true;
    q.tuned = false;
    q.small = false;
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

                int bps;
                if (!q.s_one && !q.h_one) bps = prepare_tma_kernels<false, false>();
                else if (!q.s_one && q.h_one) bps = prepare_tma_kernels<false, true>();
                else if (q.s_one && !q.h_one) bps = prepare_tma_kernels<true, false>();
                else bps = prepare_tma_kernels<true, true>();

                const uint64_t wave_chunks =
                    (uint64_t)get_num_sms() * (uint64_t)bps * (uint64_t)kLargePer;
                if (N4 <= wave_chunks) {
                    // At most one wave: every CTA resident at once, per-warp stores.
                    q.small = true;
                    q.blocks = (uint32_t)((N4 + kSmallPer - 1u) / kSmallPer);
                    q.heavy_ctas = q.blocks;  // no light CTAs
                } else {
                    // Heavy CTAs first; the last ~light_chunks chunks go to light CTAs.
                    uint64_t light_chunks = wave_chunks * kLightWaveNum / kLightWaveDen;
                    if (light_chunks > N4) light_chunks = N4;
                    const uint64_t heavy = (N4 - light_chunks) / kLargePer;
                    const uint64_t rest = N4 - heavy * kLargePer;
                    const uint64_t light = (rest + kLargeLightPer - 1u) / kLargeLightPer;
                    q.small = false;
                    q.heavy_ctas = (uint32_t)heavy;
                    q.blocks = (uint32_t)(heavy + light);
                }
            }
        }
    }
    cache = q;
    return cache;
}

template <bool kS4One, bool kHOne>
inline void launch_plan(const LaunchPlan& p, float* V_out, float* LSE_out, const float* V_a,
                        const float* lse_a, const float* V_b, const float* lse_b) {
    if (p.small) {
        merge_tma_kernel<kTmaTPB, kSmallTile, kSmallNT, kTmaMinB, true, kS4One, kHOne>
            <<<p.blocks, kTmaTPB>>>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, p.t32, p.h32, p.s4,
                                    p.n4, p.ds4.mul, p.ds4.shr, p.dh.mul, p.dh.shr,
                                    p.heavy_ctas);
    } else {
        merge_tma_kernel<kTmaTPB, kLargeTile, kLargeNT, kTmaMinB, false, kS4One, kHOne>
            <<<p.blocks, kTmaTPB>>>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, p.t32, p.h32, p.s4,
                                    p.n4, p.ds4.mul, p.ds4.shr, p.dh.mul, p.dh.shr,
                                    p.heavy_ctas);
    }
}

}  // namespace

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
