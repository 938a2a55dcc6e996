// Softmax (bf16), row-wise: out = exp(x - max) / sum(exp(x - max)).
// Fast path: one CTA (or one warp for C <= 256) per row; the whole row is held in registers,
// read from HBM once with 16-byte loads, written once with 16-byte stores.
// Plan 3: right after the input loads are issued, each thread "claims" the L2 lines of its
// output vectors with a placeholder store (one 16 B store per 128 B line by default), so the
// output translation and the dirty-victim eviction overlap the input-load latency; the final
// stores (same thread, same address, later in program order) then hit allocated lines.
// Generic path (C % 8 != 0, unaligned pointers, or very large C): one CTA per row, 3 passes.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#define SMX_LOG2E 1.4426950408889634f
#define SMX_NEG_INF_BF16X2 0xFF80FF80u

// Claim granularity: 8 -> lanes 0,8,16,24 store one placeholder per 128-byte line;
//                    1 -> every vector gets a placeholder.
#ifndef SMX_CLAIM_STRIDE
#define SMX_CLAIM_STRIDE 8
#endif
// Claim is enabled when the output size (bytes) is <= this threshold.
#ifndef SMX_CLAIM_MAX_BYTES
#define SMX_CLAIM_MAX_BYTES (1LL << 62)
#endif

static_assert(SMX_CLAIM_STRIDE == 1 || SMX_CLAIM_STRIDE == 2 || SMX_CLAIM_STRIDE == 4 ||
                  SMX_CLAIM_STRIDE == 8 || SMX_CLAIM_STRIDE == 16 || SMX_CLAIM_STRIDE == 32,
              "SMX_CLAIM_STRIDE must be a power of two <= 32");

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

// Placeholder store (zeros). volatile + "memory": the compiler may neither drop it as a dead
// store (the final store to the same address comes later) nor move it across the input loads.
__device__ __forceinline__ void smx_claim_store(uint4* p) {
    asm volatile("st.global.v4.b32 [%0], {%1, %1, %1, %1};" ::"l"(p), "r"(0u) : "memory");
}

// Final store; volatile so it stays ordered after the (volatile) claim store of the same address.
__device__ __forceinline__ void smx_final_store(uint4* p, const uint4& o) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(o.x), "r"(o.y),
                 "r"(o.z), "r"(o.w)
                 : "memory");
}

// ---------------------------------------------------------------------------------------------
// Vectorized register-resident kernel.
//   WPR   : warps per row (threads per row = 32*WPR)
//   ROWS  : rows per CTA (only with WPR == 1; then no barriers are used)
//   VPT   : uint4 vectors (8 bf16 each) per thread
//   CLAIM : issue early placeholder stores to the output lines
// Requires: C % 8 == 0, nvec = C/8 <= 32*WPR*VPT, rows 16-byte aligned.
// ---------------------------------------------------------------------------------------------
template <int WPR, int ROWS, int VPT, bool CLAIM>
__global__ void __launch_bounds__(32 * WPR * ROWS)
softmax_bf16_vec_kernel(uint4* __restrict__ out, const uint4* __restrict__ in, int N, int nvec) {
    static_assert(WPR == 1 || ROWS == 1, "multi-row CTAs only for warp-per-row");
    constexpr int TPR = 32 * WPR;
    __shared__ float s_red[2][WPR];

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

    // Early claim of the output lines: placeholder stores to this thread's own output vectors.
    // (t % 32 == lane since TPR is a multiple of 32, so v % STRIDE == 0 for these lanes:
    //  with STRIDE 8 one 16 B store lands at the start of each 128 B line of the row.)
    if constexpr (CLAIM) {
        if ((lane & (SMX_CLAIM_STRIDE - 1)) == 0) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                const int v = t + k * TPR;
                if (v < nvec) smx_claim_store(y + v);
            }
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

    // Row max.
    float m0 = -INFINITY, m1 = -INFINITY;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        m0 = fmaxf(m0, f[i]);
        m1 = fmaxf(m1, f[i + 1]);
    }
    float m = smx_warp_max(fmaxf(m0, m1));
    if constexpr (WPR > 1) {
        const int warp = threadIdx.x >> 5;
        if (lane == 0) s_red[0][warp] = m;
        __syncthreads();
        m = (lane < WPR) ? s_red[0][lane] : -INFINITY;
        m = smx_warp_max(m);
    }

    // e = exp(x - m) kept in registers (padding -inf -> 0), fp32 sum.
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT * 8; i += 2) {
        f[i] = smx_ex2((f[i] - m) * SMX_LOG2E);
        f[i + 1] = smx_ex2((f[i + 1] - m) * SMX_LOG2E);
        s0 += f[i];
        s1 += f[i + 1];
    }
    float s = smx_warp_sum(s0 + s1);
    if constexpr (WPR > 1) {
        const int warp = threadIdx.x >> 5;
        if (lane == 0) s_red[1][warp] = s;
        __syncthreads();
        s = (lane < WPR) ? s_red[1][lane] : 0.0f;
        s = smx_warp_sum(s);
    }
    const float inv = 1.0f / s;

    // Single rounding: bf16(e * inv), 16-byte stores (same thread, same address as the claim).
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (v < nvec) {
            uint4 o;
            o.x = smx_pack_bf16x2(f[8 * k + 0] * inv, f[8 * k + 1] * inv);
            o.y = smx_pack_bf16x2(f[8 * k + 2] * inv, f[8 * k + 3] * inv);
            o.z = smx_pack_bf16x2(f[8 * k + 4] * inv, f[8 * k + 5] * inv);
            o.w = smx_pack_bf16x2(f[8 * k + 6] * inv, f[8 * k + 7] * inv);
            smx_final_store(y + v, o);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Generic kernel: any C, any alignment. One CTA per row, scalar loads, three passes
// (max, sum, write); passes 2 and 3 hit L2. (Untouched by Plan 3.)
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
static inline void smx_launch_vec(uint4* out, const uint4* in, int N, int nvec, bool claim) {
    constexpr int threads = 32 * WPR * ROWS;
    const unsigned grid = (unsigned)(((long long)N + ROWS - 1) / ROWS);
    if (claim)
        softmax_bf16_vec_kernel<WPR, ROWS, VPT, true><<<grid, threads>>>(out, in, N, nvec);
    else
        softmax_bf16_vec_kernel<WPR, ROWS, VPT, false><<<grid, threads>>>(out, in, N, nvec);
}

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        const bool aligned =
            (((uintptr_t)out | (uintptr_t)input) & (uintptr_t)15) == 0;
        if (aligned && (C & 7) == 0 && C <= 32768) {
            const int nvec = C >> 3;
            uint4* o4 = reinterpret_cast<uint4*>(out);
            const uint4* i4 = reinterpret_cast<const uint4*>(input);
            const long long out_bytes = (long long)N * (long long)C * 2LL;
            const bool claim = out_bytes <= (long long)(SMX_CLAIM_MAX_BYTES);
            if (nvec <= 32) {               // C <= 256: one warp per row, 4 rows per CTA
                smx_launch_vec<1, 4, 1>(o4, i4, N, nvec, claim);
            } else if (nvec <= 64) {        // C <= 512
                smx_launch_vec<2, 1, 1>(o4, i4, N, nvec, claim);
            } else if (nvec <= 128) {       // C <= 1024: 128 threads x 8
                smx_launch_vec<4, 1, 1>(o4, i4, N, nvec, claim);
            } else if (nvec <= 256) {       // C <= 2048
                smx_launch_vec<8, 1, 1>(o4, i4, N, nvec, claim);
            } else if (nvec <= 512) {       // C <= 4096: 512 threads x 8
                smx_launch_vec<16, 1, 1>(o4, i4, N, nvec, claim);
            } else if (nvec <= 1024) {      // C <= 8192: 1024 threads x 8
                smx_launch_vec<32, 1, 1>(o4, i4, N, nvec, claim);
            } else if (nvec <= 2048) {      // C <= 16384: 1024 threads x 16
                smx_launch_vec<32, 1, 2>(o4, i4, N, nvec, claim);
            } else {                        // C <= 32768: 512 threads x 64
                smx_launch_vec<16, 1, 8>(o4, i4, N, nvec, claim);
            }
        } else {
            softmax_bf16_generic_kernel<256><<<(unsigned)N, 256>>>(out, input, C);
        }
    }
    cudaDeviceSynchronize();
}
