// Softmax (bf16), row-wise: out = exp(x - max) / sum(exp(x - max)).
// Fast path: one CTA (or one warp for C <= 256) per row; the whole row is held in registers,
// read from HBM once with 16-byte loads, written once with 16-byte stores.
//   * The output row's first/last 16 B are prefetched to L2 right after the loads are issued,
//     so the (cold) output address translation overlaps the input load instead of following it.
//   * Max and sum are reduced together as (m, s) pairs: a single __syncthreads per row.
// Split path (new, round 3): for long rows and few rows (8192 < C <= 32768, N*2 <= #SMs), each row
//   is cut into k chunks handled by k CTAs of a plain grid (N*k <= #SMs, no clusters). Each CTA
//   publishes its chunk's (m, s) to a static __device__ slot array; every word of a slot is a
//   self-tagged 64-bit value (epoch << 32 | payload) written/read with single relaxed gpu-scope
//   accesses, so no fence and no reset between calls is needed (the epoch changes every call).
//   Each CTA polls its row's k slots (lanes 0..k-1 of warp 0), merges them, then scales and stores
//   its own chunk. The poll is bounded: on timeout the lane recomputes the missing chunk's (m, s)
//   from the input itself, so correctness never depends on co-residency (no deadlock possible).
// Generic path (C % 8 != 0, unaligned pointers, or very large C): one CTA per row, 3 passes.
//
// Tuning knobs (compile-time):
//   SMX_C16K_THREADS       : 512 (default, 512 thr x 4 vec) or 1024 (1024 thr x 2 vec) for 8192 < C <= 16384
//                            (only used when the split path is not taken, e.g. N = 128)
//   SMX_USE_STREAM_SYNC    : 0 (default, cudaDeviceSynchronize) or 1 (cudaStreamSynchronize(0))
//   SMX_OUT_PREFETCH       : 1 (default) prefetch the output row/chunk to L2 early; 0 disables it
//   SMX_SPLIT_ENABLE       : 1 (default) enable the k-way row split; 0 = round-2 behaviour everywhere
//   SMX_SPLIT_MIN_C        : smallest C that is split (default 8193; 2049 also splits C = 4096)
//   SMX_SPLIT_MAX_N        : largest N that is split (default: no limit other than N*2 <= #SMs;
//                            32 keeps k = 1 for N = 64)
//   SMX_SPLIT_MAX_K        : largest k (power of two, <= 32; default 16)
//   SMX_SPLIT_MIN_CHUNK_VEC: minimum chunk size in 16-byte vectors (default 256 = 2048 elements)
//   SMX_SPLIT_512_THREADS  : chunk of 257..512 vectors: 512 (default, 512 x 1) or 256 (256 x 2)
//   SMX_SPLIT_1024_THREADS : chunk of 513..1024 vectors: 512 (default, 512 x 2) or 256 (256 x 4)
//   SMX_SPIN_LIMIT_CYCLES  : poll time-out in SM clocks before the self-compute fallback (default 4e6)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#ifndef SMX_C16K_THREADS
#define SMX_C16K_THREADS 512
#endif
#ifndef SMX_USE_STREAM_SYNC
#define SMX_USE_STREAM_SYNC 0
#endif
#ifndef SMX_OUT_PREFETCH
#define SMX_OUT_PREFETCH 1
#endif
#ifndef SMX_SPLIT_ENABLE
#define SMX_SPLIT_ENABLE 1
#endif
#ifndef SMX_SPLIT_MIN_C
#define SMX_SPLIT_MIN_C 8193
#endif
#ifndef SMX_SPLIT_MAX_N
#define SMX_SPLIT_MAX_N (1 << 30)
#endif
#ifndef SMX_SPLIT_MAX_K
#define SMX_SPLIT_MAX_K 16
#endif
#ifndef SMX_SPLIT_MIN_CHUNK_VEC
#define SMX_SPLIT_MIN_CHUNK_VEC 256
#endif
#ifndef SMX_SPLIT_512_THREADS
#define SMX_SPLIT_512_THREADS 512
#endif
#ifndef SMX_SPLIT_1024_THREADS
#define SMX_SPLIT_1024_THREADS 512
#endif
#ifndef SMX_SPIN_LIMIT_CYCLES
#define SMX_SPIN_LIMIT_CYCLES 4000000LL
#endif

#define SMX_MAX_SLOTS 1024  // CTAs of one split launch (N*k <= #SMs <= this)

static_assert(SMX_SPLIT_MAX_K >= 1 && SMX_SPLIT_MAX_K <= 32, "SMX_SPLIT_MAX_K must be in [1, 32]");
static_assert(SMX_SPLIT_MIN_CHUNK_VEC >= 1, "SMX_SPLIT_MIN_CHUNK_VEC must be positive");

#define SMX_LOG2E 1.4426950408889634f
#define SMX_NEG_INF_BF16X2 0xFF80FF80u

// Exchange slots: 16 bytes per CTA = two self-tagged 64-bit words {epoch:32 | m bits:32},
// {epoch:32 | s bits:32}. A row's k slots are contiguous (k = 8 -> one 128-byte line).
__device__ __align__(128) unsigned long long g_smx_slots[2 * SMX_MAX_SLOTS];

// 2^x, MUFU-based, keeps subnormal results (no .ftz), max rel. error ~2^-22.
__device__ __forceinline__ float smx_ex2(float x) {
    float y;
    asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Pack two floats into bf16x2 (round to nearest even); lo goes to the lower half.
__device__ __forceinline__ unsigned smx_pack_bf16x2(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

__device__ __forceinline__ float smx_bf_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float smx_bf_hi(unsigned w) { return __uint_as_float(w & 0xFFFF0000u); }

// L2 prefetch of one line (warms the address translation of that page as a side effect).
__device__ __forceinline__ void smx_prefetch_l2(const void* p) {
    asm volatile(
        "{\n\t"
        ".reg .u64 smx_ga;\n\t"
        "cvta.to.global.u64 smx_ga, %0;\n\t"
        "prefetch.global.L2 [smx_ga];\n\t"
        "}" ::"l"(p));
}

// Single-copy-atomic 64-bit accesses at gpu scope (served by L2, never a stale L1 line).
__device__ __forceinline__ void smx_st_relaxed_u64(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long smx_ld_relaxed_u64(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ float smx_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float smx_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Exponent base that never yields (-inf) - (-inf): an all -inf group uses 0.
__device__ __forceinline__ float smx_guard(float m) { return (m == -INFINITY) ? 0.0f : m; }

// ---------------------------------------------------------------------------------------------
// Vectorized register-resident kernel (unchanged from round 2).
//   WPR  : warps per row (threads per row = 32*WPR), power of two
//   ROWS : rows per CTA (only with WPR == 1; then no barriers are used)
//   VPT  : uint4 vectors (8 bf16 each) per thread
// Requires: C % 8 == 0, nvec = C/8 <= 32*WPR*VPT, rows 16-byte aligned.
// ---------------------------------------------------------------------------------------------
template <int WPR, int ROWS, int VPT>
__global__ void __launch_bounds__(32 * WPR * ROWS)
softmax_bf16_vec_kernel(uint4* __restrict__ out, const uint4* __restrict__ in, int N, int nvec) {
    static_assert(WPR == 1 || ROWS == 1, "multi-row CTAs only for warp-per-row");
    static_assert((WPR & (WPR - 1)) == 0 && WPR >= 1 && WPR <= 32, "WPR must be a power of two <= 32");
    constexpr int TPR = 32 * WPR;
    __shared__ float2 s_red[WPR];

    const int lane = threadIdx.x & 31;
    const int t = (ROWS == 1) ? (int)threadIdx.x : (int)(threadIdx.x % TPR);
    const long long row = (long long)blockIdx.x * ROWS + (ROWS == 1 ? 0 : (int)(threadIdx.x / TPR));
    if (ROWS > 1) {
        if (row >= N) return;  // whole warp leaves together; no barriers in this configuration
    }

    const uint4* x = in + row * (long long)nvec;
    uint4* y = out + row * (long long)nvec;

    // Issue every load up front.
    uint4 r[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (v < nvec) {
            r[k] = __ldg(x + v);
        } else {
            r[k] = make_uint4(SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2,
                              SMX_NEG_INF_BF16X2);
        }
    }

#if SMX_OUT_PREFETCH
    // Warm the output row's translation (and 1-2 lines) while the input loads are in flight.
    if (t == 0) {
        smx_prefetch_l2(y);
        if (nvec > 1) smx_prefetch_l2(y + (nvec - 1));
    }
#endif

    float f[VPT * 8];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        f[8 * k + 0] = smx_bf_lo(r[k].x);
        f[8 * k + 1] = smx_bf_hi(r[k].x);
        f[8 * k + 2] = smx_bf_lo(r[k].y);
        f[8 * k + 3] = smx_bf_hi(r[k].y);
        f[8 * k + 4] = smx_bf_lo(r[k].z);
        f[8 * k + 5] = smx_bf_hi(r[k].z);
        f[8 * k + 6] = smx_bf_lo(r[k].w);
        f[8 * k + 7] = smx_bf_hi(r[k].w);
    }

    // Thread-local max.
    float m0 = -INFINITY, m1 = -INFINITY;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        m0 = fmaxf(m0, f[i]);
        m1 = fmaxf(m1, f[i + 1]);
    }
    const float mt = fmaxf(m0, m1);
    const float bt = smx_guard(mt);  // all-padding thread: base 0, every e is exp2(-inf) = 0

    // e = exp(x - m_t) kept in registers (padding -inf -> 0), fp32 thread-local sum.
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        f[i] = smx_ex2((f[i] - bt) * SMX_LOG2E);
        f[i + 1] = smx_ex2((f[i + 1] - bt) * SMX_LOG2E);
        s0 += f[i];
        s1 += f[i + 1];
    }
    const float st = s0 + s1;

    // Warp-level (m, s): max, rescale own sum to the warp max, sum.
    // (mt - base) with mt = -inf gives exp2(-inf) = 0 and st = 0, so no NaN.
    const float mw = smx_warp_max(mt);
    const float sw = smx_warp_sum(st * smx_ex2((mt - smx_guard(mw)) * SMX_LOG2E));

    float M, S;
    if constexpr (WPR > 1) {
        const int warp = threadIdx.x >> 5;
        if (lane == 0) s_red[warp] = make_float2(mw, sw);
        __syncthreads();  // the only barrier
        // Each group of WPR lanes holds all WPR pairs; xor butterfly within the group.
        const float2 p = s_red[lane & (WPR - 1)];
        M = p.x;
#pragma unroll
        for (int o = WPR / 2; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        S = p.y * smx_ex2((p.x - smx_guard(M)) * SMX_LOG2E);
#pragma unroll
        for (int o = WPR / 2; o > 0; o >>= 1) S += __shfl_xor_sync(0xffffffffu, S, o);
    } else {
        M = mw;
        S = sw;
    }

    const float inv = 1.0f / S;
    // Per-thread output factor: exp(m_t - M) / S (0 for an all-padding thread; it stores nothing).
    const float fac = (mt == -INFINITY) ? 0.0f : smx_ex2((mt - M) * SMX_LOG2E) * inv;

    // Single rounding: bf16(e * fac), 16-byte stores.
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (v < nvec) {
            uint4 o;
            o.x = smx_pack_bf16x2(f[8 * k + 0] * fac, f[8 * k + 1] * fac);
            o.y = smx_pack_bf16x2(f[8 * k + 2] * fac, f[8 * k + 3] * fac);
            o.z = smx_pack_bf16x2(f[8 * k + 4] * fac, f[8 * k + 5] * fac);
            o.w = smx_pack_bf16x2(f[8 * k + 6] * fac, f[8 * k + 7] * fac);
            y[v] = o;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Split-path helpers
// ---------------------------------------------------------------------------------------------
// Poll one self-tagged slot until both words carry this call's epoch; false on time-out.
__device__ __forceinline__ bool smx_poll_pair(const unsigned long long* slot, unsigned epoch,
                                              float& m, float& s) {
    const long long t0 = clock64();
    while (true) {
        const unsigned long long a = smx_ld_relaxed_u64(slot);
        const unsigned long long b = smx_ld_relaxed_u64(slot + 1);
        if ((unsigned)(a >> 32) == epoch && (unsigned)(b >> 32) == epoch) {
            m = __uint_as_float((unsigned)a);
            s = __uint_as_float((unsigned)b);
            return true;
        }
        if (clock64() - t0 > (long long)SMX_SPIN_LIMIT_CYCLES) return false;
    }
}

// Fallback (only after a poll time-out): (m, s) of one chunk computed serially from the input.
__device__ __noinline__ float2 smx_chunk_ms(const uint4* x, int cnt) {
    float m = -INFINITY;
    for (int v = 0; v < cnt; ++v) {
        const uint4 q = x[v];
        m = fmaxf(m, fmaxf(fmaxf(smx_bf_lo(q.x), smx_bf_hi(q.x)), fmaxf(smx_bf_lo(q.y), smx_bf_hi(q.y))));
        m = fmaxf(m, fmaxf(fmaxf(smx_bf_lo(q.z), smx_bf_hi(q.z)), fmaxf(smx_bf_lo(q.w), smx_bf_hi(q.w))));
    }
    const float b = smx_guard(m);
    float s = 0.0f;
    for (int v = 0; v < cnt; ++v) {
        const uint4 q = x[v];
        s += smx_ex2((smx_bf_lo(q.x) - b) * SMX_LOG2E) + smx_ex2((smx_bf_hi(q.x) - b) * SMX_LOG2E);
        s += smx_ex2((smx_bf_lo(q.y) - b) * SMX_LOG2E) + smx_ex2((smx_bf_hi(q.y) - b) * SMX_LOG2E);
        s += smx_ex2((smx_bf_lo(q.z) - b) * SMX_LOG2E) + smx_ex2((smx_bf_hi(q.z) - b) * SMX_LOG2E);
        s += smx_ex2((smx_bf_lo(q.w) - b) * SMX_LOG2E) + smx_ex2((smx_bf_hi(q.w) - b) * SMX_LOG2E);
    }
    return make_float2(m, s);
}

// ---------------------------------------------------------------------------------------------
// Split kernel: CTA b handles chunk j = b % k of row b / k (k a power of two, kshift = log2 k).
// Chunk = `chunk` vectors (the last one may be shorter), held in registers as in the vec kernel.
// __launch_bounds__(.., 2): at most half an SM's registers/threads per CTA.
// ---------------------------------------------------------------------------------------------
template <int WPR, int VPT>
__global__ void __launch_bounds__(32 * WPR, 2)
softmax_bf16_split_kernel(uint4* __restrict__ out, const uint4* __restrict__ in, int nvec, int k,
                          int kshift, int chunk, unsigned epoch) {
    static_assert((WPR & (WPR - 1)) == 0 && WPR >= 1 && WPR <= 32, "WPR must be a power of two <= 32");
    constexpr int TPR = 32 * WPR;
    __shared__ float2 s_red[WPR];
    __shared__ float2 s_fin;

    const int t = (int)threadIdx.x;
    const int lane = t & 31;
    const int b = (int)blockIdx.x;
    const int row = b >> kshift;
    const int j = b & (k - 1);
    const int v0 = j * chunk;
    const int cnt = min(chunk, nvec - v0);  // may be <= 0 (empty chunk: m = -inf, s = 0)

    const long long rowoff = (long long)row * (long long)nvec;
    const uint4* x = in + rowoff + v0;
    uint4* y = out + rowoff + v0;
    unsigned long long* rslots = g_smx_slots + 2 * (row * k);  // this row's k slots

    // Issue every load up front.
    uint4 r[VPT];
#pragma unroll
    for (int kk = 0; kk < VPT; ++kk) {
        const int v = t + kk * TPR;
        if (v < cnt) {
            r[kk] = __ldg(x + v);
        } else {
            r[kk] = make_uint4(SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2,
                               SMX_NEG_INF_BF16X2);
        }
    }

    // Warm the exchange line(s) of this row (L2 + TLB) while the input loads are in flight.
    {
        constexpr int pt = (WPR > 1) ? 32 : 1;  // a lane other than thread 0
        if (t == pt) {
            smx_prefetch_l2(rslots);
            if (k > 8) smx_prefetch_l2(rslots + 2 * (k - 1));
        }
    }
#if SMX_OUT_PREFETCH
    if (t == 0 && cnt > 0) {
        smx_prefetch_l2(y);
        if (cnt > 1) smx_prefetch_l2(y + (cnt - 1));
    }
#endif

    float f[VPT * 8];
#pragma unroll
    for (int kk = 0; kk < VPT; ++kk) {
        f[8 * kk + 0] = smx_bf_lo(r[kk].x);
        f[8 * kk + 1] = smx_bf_hi(r[kk].x);
        f[8 * kk + 2] = smx_bf_lo(r[kk].y);
        f[8 * kk + 3] = smx_bf_hi(r[kk].y);
        f[8 * kk + 4] = smx_bf_lo(r[kk].z);
        f[8 * kk + 5] = smx_bf_hi(r[kk].z);
        f[8 * kk + 6] = smx_bf_lo(r[kk].w);
        f[8 * kk + 7] = smx_bf_hi(r[kk].w);
    }

    float m0 = -INFINITY, m1 = -INFINITY;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        m0 = fmaxf(m0, f[i]);
        m1 = fmaxf(m1, f[i + 1]);
    }
    const float mt = fmaxf(m0, m1);
    const float bt = smx_guard(mt);

    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        f[i] = smx_ex2((f[i] - bt) * SMX_LOG2E);
        f[i + 1] = smx_ex2((f[i + 1] - bt) * SMX_LOG2E);
        s0 += f[i];
        s1 += f[i + 1];
    }
    const float st = s0 + s1;

    const float mw = smx_warp_max(mt);
    const float sw = smx_warp_sum(st * smx_ex2((mt - smx_guard(mw)) * SMX_LOG2E));

    // CTA-level (m, s) of this chunk.
    float Mc, Sc;
    if constexpr (WPR > 1) {
        const int warp = t >> 5;
        if (lane == 0) s_red[warp] = make_float2(mw, sw);
        __syncthreads();
        const float2 p = s_red[lane & (WPR - 1)];
        Mc = p.x;
#pragma unroll
        for (int o = WPR / 2; o > 0; o >>= 1) Mc = fmaxf(Mc, __shfl_xor_sync(0xffffffffu, Mc, o));
        Sc = p.y * smx_ex2((p.x - smx_guard(Mc)) * SMX_LOG2E);
#pragma unroll
        for (int o = WPR / 2; o > 0; o >>= 1) Sc += __shfl_xor_sync(0xffffffffu, Sc, o);
    } else {
        Mc = mw;
        Sc = sw;
    }

    // Publish, gather the row's k pairs, merge (warp 0 only; warp-uniform branch).
    if (t < 32) {
        if (t == 0) {
            const unsigned long long tag = (unsigned long long)epoch << 32;
            smx_st_relaxed_u64(rslots + 2 * j, tag | (unsigned long long)__float_as_uint(Mc));
            smx_st_relaxed_u64(rslots + 2 * j + 1, tag | (unsigned long long)__float_as_uint(Sc));
        }
        float pm = -INFINITY, ps = 0.0f;
        if (lane < k) {
            if (lane == j) {
                pm = Mc;
                ps = Sc;
            } else if (!smx_poll_pair(rslots + 2 * lane, epoch, pm, ps)) {
                // Partner not seen in time (not co-resident?): compute its (m, s) ourselves.
                const int c2 = min(chunk, nvec - lane * chunk);
                const float2 q = smx_chunk_ms(in + rowoff + (long long)lane * chunk, c2);
                pm = q.x;
                ps = q.y;
            }
        }
        // k-lane butterfly (k is a power of two; lanes >= k hold (-inf, 0) and stay in their groups).
        float M = pm;
        for (int o = k >> 1; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float S = ps * smx_ex2((pm - smx_guard(M)) * SMX_LOG2E);
        for (int o = k >> 1; o > 0; o >>= 1) S += __shfl_xor_sync(0xffffffffu, S, o);
        if (lane == 0) s_fin = make_float2(M, 1.0f / S);
    }
    __syncthreads();

    const float2 fin = s_fin;
    const float fac = (mt == -INFINITY) ? 0.0f : smx_ex2((mt - fin.x) * SMX_LOG2E) * fin.y;

#pragma unroll
    for (int kk = 0; kk < VPT; ++kk) {
        const int v = t + kk * TPR;
        if (v < cnt) {
            uint4 o;
            o.x = smx_pack_bf16x2(f[8 * kk + 0] * fac, f[8 * kk + 1] * fac);
            o.y = smx_pack_bf16x2(f[8 * kk + 2] * fac, f[8 * kk + 3] * fac);
            o.z = smx_pack_bf16x2(f[8 * kk + 4] * fac, f[8 * kk + 5] * fac);
            o.w = smx_pack_bf16x2(f[8 * kk + 6] * fac, f[8 * kk + 7] * fac);
            y[v] = o;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Generic kernel: any C, any alignment. One CTA per row, scalar loads, three passes
// (max, sum, write); passes 2 and 3 hit L2.
// ---------------------------------------------------------------------------------------------
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
softmax_bf16_generic_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                            int C) {
    constexpr int NW = THREADS / 32;
    __shared__ float s_max[NW];
    __shared__ float s_sum[NW];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;

    const long long row = blockIdx.x;
    const __nv_bfloat16* x = in + row * (long long)C;
    __nv_bfloat16* y = out + row * (long long)C;

    float m = -INFINITY;
    for (int j = threadIdx.x; j < C; j += THREADS) m = fmaxf(m, __bfloat162float(x[j]));
    m = smx_warp_max(m);
    if (lane == 0) s_max[warp] = m;
    __syncthreads();
    m = (lane < NW) ? s_max[lane] : -INFINITY;
    m = smx_warp_max(m);

    float s = 0.0f;
    for (int j = threadIdx.x; j < C; j += THREADS)
        s += smx_ex2((__bfloat162float(x[j]) - m) * SMX_LOG2E);
    s = smx_warp_sum(s);
    if (lane == 0) s_sum[warp] = s;
    __syncthreads();
    s = (lane < NW) ? s_sum[lane] : 0.0f;
    s = smx_warp_sum(s);
    const float inv = 1.0f / s;

    for (int j = threadIdx.x; j < C; j += THREADS) {
        const float e = smx_ex2((__bfloat162float(x[j]) - m) * SMX_LOG2E);
        y[j] = __float2bfloat16_rn(e * inv);
    }
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------
template <int WPR, int ROWS, int VPT>
static inline void smx_launch_vec(uint4* out, const uint4* in, int N, int nvec) {
    constexpr int threads = 32 * WPR * ROWS;
    const unsigned grid = (unsigned)(((long long)N + ROWS - 1) / ROWS);
    softmax_bf16_vec_kernel<WPR, ROWS, VPT><<<grid, threads>>>(out, in, N, nvec);
}

template <int WPR, int VPT>
static inline void smx_launch_split(uint4* out, const uint4* in, int N, int nvec, int k, int kshift,
                                    int chunk, unsigned epoch) {
    softmax_bf16_split_kernel<WPR, VPT><<<(unsigned)(N * k), 32 * WPR>>>(out, in, nvec, k, kshift,
                                                                         chunk, epoch);
}

// SM count, queried once and cached (-1: unknown -> never split).
static int smx_sm_count() {
    static int s_sms = 0;
    if (s_sms == 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v <= 0) {
            v = -1;
        }
        s_sms = v;
    }
    return s_sms;
}

// Largest power-of-two k with N*k <= #SMs, nvec/k >= min chunk, k <= max k; 1 = no split.
static int smx_split_k(int N, int nvec) {
#if SMX_SPLIT_ENABLE
    if ((long long)nvec * 8 < (long long)SMX_SPLIT_MIN_C) return 1;
    if (N > SMX_SPLIT_MAX_N) return 1;
    const int sms = smx_sm_count();
    if (sms <= 0) return 1;
    const long long lim = (sms < SMX_MAX_SLOTS) ? sms : SMX_MAX_SLOTS;
    int k = 1;
    while (k * 2 <= SMX_SPLIT_MAX_K && (long long)N * (k * 2) <= lim &&
           (long long)nvec >= (long long)(k * 2) * SMX_SPLIT_MIN_CHUNK_VEC) {
        k *= 2;
    }
    return k;
#else
    (void)N;
    (void)nvec;
    return 1;
#endif
}

static bool smx_try_split(uint4* o4, const uint4* i4, int N, int nvec) {
    const int k = smx_split_k(N, nvec);
    if (k < 2) return false;
    const int chunk = (nvec + k - 1) / k;
    if (chunk > 2048) return false;  // no register-resident config beyond 512 x 4 vectors
    int kshift = 0;
    while ((1 << kshift) < k) ++kshift;

    static unsigned s_epoch = 0;  // slots are self-tagged: nothing to reset between calls
    unsigned epoch = ++s_epoch;
    if (epoch == 0) epoch = s_epoch = 1;

    if (chunk <= 32) {
        smx_launch_split<1, 1>(o4, i4, N, nvec, k, kshift, chunk, epoch);
    } else if (chunk <= 64) {
        smx_launch_split<2, 1>(o4, i4, N, nvec, k, kshift, chunk, epoch);
    } else if (chunk <= 128) {
        smx_launch_split<4, 1>(o4, i4, N, nvec, k, kshift, chunk, epoch);
    } else if (chunk <= 256) {      // e.g. C=16384, N=16 (k=8): 256 threads x 1
        smx_launch_split<8, 1>(o4, i4, N, nvec, k, kshift, chunk, epoch);
    } else if (chunk <= 512) {      // e.g. C=16384, N=32 (k=4)
#if SMX_SPLIT_512_THREADS == 256
        smx_launch_split<8, 2>(o4, i4, N, nvec, k, kshift, chunk, epoch);
#else
        smx_launch_split<16, 1>(o4, i4, N, nvec, k, kshift, chunk, epoch);
#endif
    } else if (chunk <= 1024) {     // e.g. C=16384, N=64 (k=2)
#if SMX_SPLIT_1024_THREADS == 256
        smx_launch_split<8, 4>(o4, i4, N, nvec, k, kshift, chunk, epoch);
#else
        smx_launch_split<16, 2>(o4, i4, N, nvec, k, kshift, chunk, epoch);
#endif
    } else {                        // chunk <= 2048: 512 threads x 4
        smx_launch_split<16, 4>(o4, i4, N, nvec, k, kshift, chunk, epoch);
    }
    return true;
}

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        const bool aligned =
            (((uintptr_t)out | (uintptr_t)input) & (uintptr_t)15) == 0;
        if (aligned && (C & 7) == 0 && C <= 32768) {
            const int nvec = C >> 3;
            uint4* o4 = reinterpret_cast<uint4*>(out);
            const uint4* i4 = reinterpret_cast<const uint4*>(input);
            if (smx_try_split(o4, i4, N, nvec)) {
                // k-way row split through global (m, s) exchange
            } else if (nvec <= 32) {        // C <= 256: one warp per row, 4 rows per CTA
                smx_launch_vec<1, 4, 1>(o4, i4, N, nvec);
            } else if (nvec <= 64) {        // C <= 512
                smx_launch_vec<2, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 128) {       // C <= 1024: 128 threads x 8
                smx_launch_vec<4, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 256) {       // C <= 2048
                smx_launch_vec<8, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 512) {       // C <= 4096: 512 threads x 8
                smx_launch_vec<16, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 1024) {      // C <= 8192: 1024 threads x 8
                smx_launch_vec<32, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 2048) {      // C <= 16384
#if SMX_C16K_THREADS == 1024
                smx_launch_vec<32, 1, 2>(o4, i4, N, nvec);   // 1024 threads x 16
#else
                smx_launch_vec<16, 1, 4>(o4, i4, N, nvec);   // 512 threads x 32
#endif
            } else {                        // C <= 32768: 512 threads x 64
                smx_launch_vec<16, 1, 8>(o4, i4, N, nvec);
            }
        } else {
            softmax_bf16_generic_kernel<256><<<(unsigned)N, 256>>>(out, input, C);
        }
    }
#if SMX_USE_STREAM_SYNC
    cudaStreamSynchronize(0);
#else
    cudaDeviceSynchronize();
#endif
}
