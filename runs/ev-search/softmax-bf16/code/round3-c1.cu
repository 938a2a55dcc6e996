// Softmax (bf16), row-wise: out = exp(x - max) / sum(exp(x - max)).
// Fast path: one CTA (or one warp for C <= 256) per row; the whole row is held in registers,
// read from HBM once with 16-byte loads, written once with 16-byte stores.
//   * Streamed exponentials with a lazy base: each thread takes its base from the max of its
//     FIRST vector and computes that vector's exponentials (and their sum) before it touches the
//     next vector, so the MUFU work overlaps the arrival of the later loads. A later vector whose
//     max exceeds the base by more than SMX_REBASE_LOG2 (log2 units) moves the base: the running
//     sum is rescaled once, and the vectors keep the base they were computed with (bk[k]); their
//     output factor is exp2(bk[k] - M) / S. Every stored e value is <= 2^10.
//   * One MUFU per exponential: e = ex2.approx.ftz(x*log2e + (2 - b*log2e)) -- a single FFMA and
//     a single MUFU.EX2. The +2 offset (x4 on every e and on S) cancels in e*fac; it makes the ftz
//     flush harmless: a flushed e (< 2^-126) belongs to an output < 2^-128, which no bf16
//     implementation can get within rtol anyway.
//   * The output factor and the final e*fac multiply are explicitly non-ftz (inline PTX), so
//     outputs near the bottom of the normal range stay right in every build variant.
//   * Vector max on packed bf16x2 words (exact): 3 max.bf16x2 + 1 fmax per 8 values.
//   * The output row's first/last 16 B are prefetched to L2 right after the loads are issued.
//   * Max and sum are reduced together as (m, s) pairs: a single __syncthreads per row.
// Generic path (C % 8 != 0, unaligned pointers, or very large C): one CTA per row, 3 passes.
//
// Tuning knobs (compile-time):
//   SMX_C16K_THREADS   : 8192 < C <= 16384: 512 (default, 512 thr x 4 vec), 1024 (x 2), 256 (x 8)
//   SMX_C4K_THREADS    : 2048 < C <= 4096 : 512 (default, 512 thr x 1 vec), 256 (x 2)
//   SMX_USE_STREAM_SYNC: 0 (default, cudaDeviceSynchronize) or 1 (cudaStreamSynchronize(0))
//   SMX_OUT_PREFETCH   : 1 (default) prefetch the output row to L2 early; 0 disables it
//   SMX_REBASE_LOG2    : base-move threshold in log2 units (default 8)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#ifndef SMX_C16K_THREADS
#define SMX_C16K_THREADS 512
#endif
#ifndef SMX_C4K_THREADS
#define SMX_C4K_THREADS 512
#endif
#ifndef SMX_USE_STREAM_SYNC
#define SMX_USE_STREAM_SYNC 0
#endif
#ifndef SMX_OUT_PREFETCH
#define SMX_OUT_PREFETCH 1
#endif
#ifndef SMX_REBASE_LOG2
#define SMX_REBASE_LOG2 8.0f
#endif

#define SMX_LOG2E 1.4426950408889634f
#define SMX_NEG_INF_BF16X2 0xFF80FF80u

// 2^x, MUFU-based, keeps subnormal results (no .ftz), max rel. error ~2^-22.
__device__ __forceinline__ float smx_ex2(float x) {
    float y;
    asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 2^x, a single MUFU.EX2 (results below 2^-126 flush to 0).
__device__ __forceinline__ float smx_ex2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// a*b, round to nearest, subnormals preserved whatever the build flags (no fast-math ftz).
__device__ __forceinline__ float smx_mul(float a, float b) {
    float d;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
}

// Packed bf16x2 max (exact).
__device__ __forceinline__ unsigned smx_bmax2(unsigned a, unsigned b) {
    unsigned d;
    asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
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
// Vectorized register-resident kernel.
//   WPR  : warps per row (threads per row = 32*WPR), power of two
//   ROWS : rows per CTA (only with WPR == 1; then no barriers are used)
//   VPT  : uint4 vectors (8 bf16 each) per thread
// Requires: C % 8 == 0, nvec = C/8 <= 32*WPR*VPT, rows 16-byte aligned.
// All max / base quantities below are in log2 units (value * log2e).
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

    // Issue every load up front (v = t + k*TPR increases with k: once padding, always padding).
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

    // Streamed exponentials, vector by vector, against a lazily moved base.
    float e[VPT * 8];
    float bk[VPT];             // base each vector was computed with
    float bl = -INFINITY;      // running thread base
    float s = 0.0f;            // running sum, relative to bl, x4 offset
    bool rebased = false;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const unsigned w0 = r[k].x, w1 = r[k].y, w2 = r[k].z, w3 = r[k].w;
        const unsigned pm = smx_bmax2(smx_bmax2(w0, w1), smx_bmax2(w2, w3));
        const float vml = fmaxf(smx_bf_lo(pm), smx_bf_hi(pm)) * SMX_LOG2E;
        if (k == 0) {
            bl = vml;
        } else if (vml > bl + SMX_REBASE_LOG2) {
            // Rare: move the base up. bl == -inf gives factor 0 on a zero sum.
            s *= smx_ex2_ftz(bl - vml);
            bl = vml;
            rebased = true;
        }
        bk[k] = bl;
        const float c = 2.0f - smx_guard(bl);   // -inf data -> exp2(-inf) = 0, never NaN

        const float e0 = smx_ex2_ftz(fmaf(smx_bf_lo(w0), SMX_LOG2E, c));
        const float e1 = smx_ex2_ftz(fmaf(smx_bf_hi(w0), SMX_LOG2E, c));
        const float e2 = smx_ex2_ftz(fmaf(smx_bf_lo(w1), SMX_LOG2E, c));
        const float e3 = smx_ex2_ftz(fmaf(smx_bf_hi(w1), SMX_LOG2E, c));
        const float e4 = smx_ex2_ftz(fmaf(smx_bf_lo(w2), SMX_LOG2E, c));
        const float e5 = smx_ex2_ftz(fmaf(smx_bf_hi(w2), SMX_LOG2E, c));
        const float e6 = smx_ex2_ftz(fmaf(smx_bf_lo(w3), SMX_LOG2E, c));
        const float e7 = smx_ex2_ftz(fmaf(smx_bf_hi(w3), SMX_LOG2E, c));
        e[8 * k + 0] = e0;
        e[8 * k + 1] = e1;
        e[8 * k + 2] = e2;
        e[8 * k + 3] = e3;
        e[8 * k + 4] = e4;
        e[8 * k + 5] = e5;
        e[8 * k + 6] = e6;
        e[8 * k + 7] = e7;
        s += ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7));
    }

    // Warp-level (m, s): max of the bases, rescale own sum to it, sum.
    // bl = -inf (no data) gives exp2(-inf) = 0 and s = 0, so no NaN.
    const float mw = smx_warp_max(bl);
    const float sw = smx_warp_sum(s * smx_ex2(bl - smx_guard(mw)));

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
        S = p.y * smx_ex2(p.x - smx_guard(M));
#pragma unroll
        for (int o = WPR / 2; o > 0; o >>= 1) S += __shfl_xor_sync(0xffffffffu, S, o);
    } else {
        M = mw;
        S = sw;
    }

    const float inv = 1.0f / S;

    // Output factors: exp2(bk - M) / S (the x4 offset of e and S cancels).
    // Non-ftz: keeps 12+ significant bits wherever the output can pass the tolerance.
    float fk[VPT];
    const float fl = (bl == -INFINITY) ? 0.0f : smx_mul(smx_ex2(bl - M), inv);
#pragma unroll
    for (int k = 0; k < VPT; ++k) fk[k] = fl;
    if (VPT > 1 && rebased) {
#pragma unroll
        for (int k = 0; k < VPT; ++k)
            fk[k] = (bk[k] == -INFINITY) ? 0.0f : smx_mul(smx_ex2(bk[k] - M), inv);
    }

    // Single rounding: bf16(e * fac), 16-byte stores.
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (v < nvec) {
            const float fac = fk[k];
            uint4 o;
            o.x = smx_pack_bf16x2(smx_mul(e[8 * k + 0], fac), smx_mul(e[8 * k + 1], fac));
            o.y = smx_pack_bf16x2(smx_mul(e[8 * k + 2], fac), smx_mul(e[8 * k + 3], fac));
            o.z = smx_pack_bf16x2(smx_mul(e[8 * k + 4], fac), smx_mul(e[8 * k + 5], fac));
            o.w = smx_pack_bf16x2(smx_mul(e[8 * k + 6], fac), smx_mul(e[8 * k + 7], fac));
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
        y[j] = __float2bfloat16_rn(smx_mul(e, inv));
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

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        const bool aligned =
            (((uintptr_t)out | (uintptr_t)input) & (uintptr_t)15) == 0;
        if (aligned && (C & 7) == 0 && C <= 32768) {
            const int nvec = C >> 3;
            uint4* o4 = reinterpret_cast<uint4*>(out);
            const uint4* i4 = reinterpret_cast<const uint4*>(input);
            if (nvec <= 32) {               // C <= 256: one warp per row, 4 rows per CTA
                smx_launch_vec<1, 4, 1>(o4, i4, N, nvec);
            } else if (nvec <= 64) {        // C <= 512
                smx_launch_vec<2, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 128) {       // C <= 1024: 128 threads x 8
                smx_launch_vec<4, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 256) {       // C <= 2048
                smx_launch_vec<8, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 512) {       // C <= 4096
#if SMX_C4K_THREADS == 256
                smx_launch_vec<8, 1, 2>(o4, i4, N, nvec);    // 256 threads x 16
#else
                smx_launch_vec<16, 1, 1>(o4, i4, N, nvec);   // 512 threads x 8
#endif
            } else if (nvec <= 1024) {      // C <= 8192: 1024 threads x 8
                smx_launch_vec<32, 1, 1>(o4, i4, N, nvec);
            } else if (nvec <= 2048) {      // C <= 16384
#if SMX_C16K_THREADS == 1024
                smx_launch_vec<32, 1, 2>(o4, i4, N, nvec);   // 1024 threads x 16
#elif SMX_C16K_THREADS == 256
                smx_launch_vec<8, 1, 8>(o4, i4, N, nvec);    // 256 threads x 64
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
