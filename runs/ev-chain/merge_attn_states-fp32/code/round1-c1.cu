// merge_attn_states (fp32): barrier-free, flat, vectorised streaming kernel.
//
// V arrays are token-major [T][H][S] and are treated as one flat array of T*H*S floats.
// LSEs are head-major [H][T] (index h*T + t).
//
// Fast path (S % 4 == 0 and V_out, V_a, V_b 16-byte aligned): every thread handles kUnroll
// float4 chunks. In each unrolled step a warp covers 32 consecutive float4 (512 B contiguous).
// All V loads (streaming, L1 no-allocate, L2 256B prefetch) and the LSE loads for every chunk
// go out before any arithmetic. Each thread finds its own row (r = chunk / (S/4), t = r / H,
// h = r % H) and computes the weights with the baseline's arithmetic (isinf -> -FLT_MAX, max,
// precise expf, division, logf). The thread whose chunk starts at s == 0 writes LSE_out.
// A float4 never crosses a row because S % 4 == 0.
//
// Fallback (S % 4 != 0 or misaligned pointers): the same flat kernel, one float per step.
//
// 32-bit indexing is used whenever the index space fits, 64-bit otherwise.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ float4 ld_stream4(const float4* p) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
    return v;
}

// Weights with exactly the baseline's arithmetic. Returns m and sum so the caller can form
// the merged LSE only where needed.
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

// ---------------------------------------------------------------------------------------------
// Vectorised body
// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
// Scalar fallback body
// ---------------------------------------------------------------------------------------------
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

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

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
