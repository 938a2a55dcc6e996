// Softmax (bf16), row-wise: out = exp(x - max) / sum(exp(x - max)).
// Fast path: one CTA (or one warp for C <= 256) per row; the whole row is held in registers,
// read from HBM once with 16-byte loads, written once with 16-byte stores.
//   * The output row's first/last 16 B are prefetched to L2 right after the loads are issued,
//     so the (cold) output address translation overlaps the input load instead of following it.
//   * Max and sum are reduced together as (m, s) pairs: a single __syncthreads per row.
// Generic path (C % 8 != 0, unaligned pointers, or very large C): one CTA per row, 3 passes.
//
// Tuning knobs (compile-time):
//   SMX_C16K_THREADS   : 512 (default, 512 thr x 4 vec) or 1024 (1024 thr x 2 vec) for 8192 < C <= 16384
//   SMX_USE_STREAM_SYNC: 0 (default, cudaDeviceSynchronize) or 1 (cudaStreamSynchronize(0))
//   SMX_OUT_PREFETCH   : 1 (default) prefetch the output row to L2 early; 0 disables it
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

#define SMX_LOG2E 1.4426950408889634f
#define SMX_NEG_INF_BF16X2 0xFF80FF80u

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
