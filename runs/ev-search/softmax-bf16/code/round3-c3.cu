// Softmax (bf16), row-wise: out = exp(x - max) / sum(exp(x - max)).
// Fast path: one CTA (or one warp) per row; the whole row is held in registers,
// read from HBM once with 16-byte loads, written once with 16-byte stores.
// Reductions use redux.sync (max on order-preserving int keys, sum in fixed point) and a
// single barrier that merges per-warp (max, sum) pairs.
// Generic path (C % 8 != 0, unaligned pointers, or very large C): one CTA per row, 3 passes.
//
// Knobs (compile-time, -D...):
//   SMX_CFG_1024  : 512 < C <= 1024.  1 = one warp/row, 4 vec/thread, 4 rows/CTA (default)
//                                     0 = 128 threads x 1 vec (round1-c1)
//   SMX_CFG_4096  : 2048 < C <= 4096. 1 = 128 threads x 4 vec (default)
//                                     0 = 512 threads x 1 vec (round1-c1)
//   SMX_CFG_16384 : 8192 < C <= 16384. 0 = 1024 threads x 2 vec (default, round1-c1)
//                                      1 = 512 threads x 4 vec
//   SMX_L2_256B   : 1 = ld.global.nc.L2::256B row loads for C > 2048 (default), 0 = __ldg
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#ifndef SMX_CFG_1024
#define SMX_CFG_1024 1
#endif
#ifndef SMX_CFG_4096
#define SMX_CFG_4096 1
#endif
#ifndef SMX_CFG_16384
#define SMX_CFG_16384 0
#endif
#ifndef SMX_L2_256B
#define SMX_L2_256B 1
#endif

#define SMX_LOG2E 1.4426950408889634f
#define SMX_NEG_INF_BF16X2 0xFF80FF80u
#define SMX_FULL 0xffffffffu

__host__ __device__ constexpr int smx_ilog2(int v) { return v <= 1 ? 0 : 1 + smx_ilog2(v >> 1); }

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

// Order-preserving float <-> int map (an involution; NaN not considered).
__device__ __forceinline__ int smx_f2key(float f) {
    const int b = __float_as_int(f);
    return b ^ ((b >> 31) & 0x7FFFFFFF);
}
__device__ __forceinline__ float smx_key2f(int k) {
    return __int_as_float(k ^ ((k >> 31) & 0x7FFFFFFF));
}

__device__ __forceinline__ float smx_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(SMX_FULL, v, o));
    return v;
}

__device__ __forceinline__ float smx_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(SMX_FULL, v, o);
    return v;
}

// 16-byte read-only load, optionally with a 256-byte L2 prefetch size hint.
template <bool PF>
__device__ __forceinline__ uint4 smx_ld(const uint4* p) {
    if constexpr (PF) {
        uint4 v;
        asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
        return v;
    } else {
        return __ldg(p);
    }
}

// ---------------------------------------------------------------------------------------------
// Vectorized register-resident kernel.
//   WPR  : warps per row (threads per row = 32*WPR), power of two
//   ROWS : rows per CTA (only with WPR == 1; then no barriers are used)
//   VPT  : uint4 vectors (8 bf16 each) per thread, power of two
//   PF   : use ld.global.nc.L2::256B for the row loads
// Requires: C % 8 == 0, nvec = C/8 <= 32*WPR*VPT, rows 16-byte aligned.
// ---------------------------------------------------------------------------------------------
template <int WPR, int ROWS, int VPT, bool PF>
__global__ void __launch_bounds__(32 * WPR * ROWS)
softmax_bf16_vec_kernel(uint4* __restrict__ out, const uint4* __restrict__ in, int N, int nvec) {
    static_assert(WPR == 1 || ROWS == 1, "multi-row CTAs only for warp-per-row");
    static_assert((VPT & (VPT - 1)) == 0 && (WPR & (WPR - 1)) == 0, "powers of two");
    constexpr int TPR = 32 * WPR;
    // Warp-level fixed point: per-thread value <= 8*VPT, 32 lanes -> <= 2^31.
    constexpr int FW = 23 - smx_ilog2(VPT);
    constexpr float WS = (float)(1u << FW);
    constexpr float WS_INV = 1.0f / WS;
    // Cross-warp fixed point: row sum <= capacity = 256*WPR*VPT elements -> <= 2^31.
    constexpr int FX = 31 - (8 + smx_ilog2(WPR) + smx_ilog2(VPT));
    static_assert(FX >= 8 && FX <= 30, "cross-warp scale");
    constexpr float XS = (float)(1u << FX);
    constexpr float XS_INV = 1.0f / XS;

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
            r[k] = smx_ld<PF>(x + v);
        } else {
            r[k] = make_uint4(SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2,
                              SMX_NEG_INF_BF16X2);
        }
    }

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

    // Thread max.
    float m0 = -INFINITY, m1 = -INFINITY;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        m0 = fmaxf(m0, f[i]);
        m1 = fmaxf(m1, f[i + 1]);
    }
    const float mt = fmaxf(m0, m1);
    const bool empty = (mt == -INFINITY);  // all of this thread's elements are -inf / padding

    // Warp max (one redux), overlapped with the exps below, which use the thread's own max.
    const int mw_key = __reduce_max_sync(SMX_FULL, smx_f2key(mt));

    const float bt = empty ? 0.0f : mt;
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        f[i] = smx_ex2((f[i] - bt) * SMX_LOG2E);
        f[i + 1] = smx_ex2((f[i + 1] - bt) * SMX_LOG2E);
        s0 += f[i];
        s1 += f[i + 1];
    }
    const float st = s0 + s1;  // in [0, 8*VPT]

    const float mw = smx_key2f(mw_key);
    const float ct = empty ? 0.0f : smx_ex2((mt - mw) * SMX_LOG2E);  // in [0, 1]
    const float rt = st * ct;                                        // in [0, 8*VPT]
    const unsigned sw_fx = __reduce_add_sync(SMX_FULL, __float2uint_rn(rt * WS));
    const float sw = __uint2float_rn(sw_fx) * WS_INV;  // >= 1 for a warp with a finite element

    float g;  // per-thread output factor: exp(mt - M) / S
    if constexpr (WPR == 1) {
        g = ct * (1.0f / sw);
    } else {
        __shared__ float s_m[WPR];
        __shared__ float s_s[WPR];
        const int warp = threadIdx.x >> 5;
        if (lane == 0) {
            s_m[warp] = mw;
            s_s[warp] = sw;
        }
        __syncthreads();
        const float mj = (lane < WPR) ? s_m[lane] : -INFINITY;
        const float sj = (lane < WPR) ? s_s[lane] : 0.0f;
        const float M = smx_key2f(__reduce_max_sync(SMX_FULL, smx_f2key(mj)));
        const float tj = (sj > 0.0f) ? sj * smx_ex2((mj - M) * SMX_LOG2E) : 0.0f;
        const unsigned S_fx = __reduce_add_sync(SMX_FULL, __float2uint_rn(tj * XS));
        const float S = __uint2float_rn(S_fx) * XS_INV;
        g = empty ? 0.0f : smx_ex2((mt - M) * SMX_LOG2E) * (1.0f / S);
    }

    // Single rounding: bf16(e * g), 16-byte stores.
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (v < nvec) {
            uint4 o;
            o.x = smx_pack_bf16x2(f[8 * k + 0] * g, f[8 * k + 1] * g);
            o.y = smx_pack_bf16x2(f[8 * k + 2] * g, f[8 * k + 3] * g);
            o.z = smx_pack_bf16x2(f[8 * k + 4] * g, f[8 * k + 5] * g);
            o.w = smx_pack_bf16x2(f[8 * k + 6] * g, f[8 * k + 7] * g);
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
template <int WPR, int ROWS, int VPT, bool PF>
static inline void smx_launch_vec(uint4* out, const uint4* in, int N, int nvec) {
    constexpr int threads = 32 * WPR * ROWS;
    const unsigned grid = (unsigned)(((long long)N + ROWS - 1) / ROWS);
    softmax_bf16_vec_kernel<WPR, ROWS, VPT, PF><<<grid, threads>>>(out, in, N, nvec);
}

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    constexpr bool PF = (SMX_L2_256B != 0);
    if (N > 0 && C > 0) {
        const bool aligned =
            (((uintptr_t)out | (uintptr_t)input) & (uintptr_t)15) == 0;
        if (aligned && (C & 7) == 0 && C <= 32768) {
            const int nvec = C >> 3;
            uint4* o4 = reinterpret_cast<uint4*>(out);
            const uint4* i4 = reinterpret_cast<const uint4*>(input);
            if (nvec <= 32) {               // C <= 256: one warp per row, 4 rows per CTA
                smx_launch_vec<1, 4, 1, false>(o4, i4, N, nvec);
            } else if (nvec <= 64) {        // C <= 512
                smx_launch_vec<2, 1, 1, false>(o4, i4, N, nvec);
            } else if (nvec <= 128) {       // C <= 1024
#if SMX_CFG_1024
                smx_launch_vec<1, 4, 4, false>(o4, i4, N, nvec);   // warp/row, 32 x 4 vec
#else
                smx_launch_vec<4, 1, 1, false>(o4, i4, N, nvec);   // 128 threads x 1 vec
#endif
            } else if (nvec <= 256) {       // C <= 2048
                smx_launch_vec<8, 1, 1, false>(o4, i4, N, nvec);
            } else if (nvec <= 512) {       // C <= 4096
#if SMX_CFG_4096
                smx_launch_vec<4, 1, 4, PF>(o4, i4, N, nvec);      // 128 threads x 4 vec
#else
                smx_launch_vec<16, 1, 1, PF>(o4, i4, N, nvec);     // 512 threads x 1 vec
#endif
            } else if (nvec <= 1024) {      // C <= 8192: 1024 threads x 1 vec
                smx_launch_vec<32, 1, 1, PF>(o4, i4, N, nvec);
            } else if (nvec <= 2048) {      // C <= 16384
#if SMX_CFG_16384
                smx_launch_vec<16, 1, 4, PF>(o4, i4, N, nvec);     // 512 threads x 4 vec
#else
                smx_launch_vec<32, 1, 2, PF>(o4, i4, N, nvec);     // 1024 threads x 2 vec
#endif
            } else {                        // C <= 32768: 512 threads x 8 vec
                smx_launch_vec<16, 1, 8, PF>(o4, i4, N, nvec);
            }
        } else {
            softmax_bf16_generic_kernel<256><<<(unsigned)N, 256>>>(out, input, C);
        }
    }
    cudaDeviceSynchronize();
}
