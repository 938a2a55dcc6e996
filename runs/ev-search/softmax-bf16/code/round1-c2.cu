// Softmax (bf16), row-wise over an N x C matrix: out = exp(x - max) / sum(exp(x - max)).
//
// Plan 2: latency hiding across SMs.
//  * C > 1024 (C % 8 == 0, 16B-aligned): one thread-block cluster per row, cs = clamp(128/N,1,8)
//    (power of two, reduced until C % (8*cs) == 0). Each CTA owns C/cs contiguous elements, loads
//    them with 16-byte loads (all issued before first use), computes a per-thread (max, sum) pair,
//    reduces it over the block, and the cs block pairs are combined through distributed shared
//    memory. Each thread then rescales its register-resident exp values and stores bf16.
//  * C <= 1024 (C % 8 == 0, aligned): one warp per row, shuffle-only reductions, 4 rows per CTA.
//  * Anything else (odd/prime C, misaligned pointers, very long slices): generic looping
//    online-softmax kernel, one CTA per row.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdint.h>
#include <math.h>

namespace cg = cooperative_groups;

#define SMX_LOG2E 1.4426950408889634f
#define SMX_NEG_INF_BF16X2 0xFF80FF80u

// ------------------------------------------------------------------------------------------
// Device helpers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ float smx_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
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

// A max of -inf (no valid element) is replaced by 0 as the exponent base so that
// exp(-inf - base) = 0 instead of NaN.
__device__ __forceinline__ float smx_guard(float m) { return (m == -INFINITY) ? 0.0f : m; }

__device__ __forceinline__ __nv_bfloat162 smx_as_bf162(uint32_t u) {
    return *reinterpret_cast<const __nv_bfloat162*>(&u);
}

__device__ __forceinline__ uint32_t smx_pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x = lo (low half), .y = hi
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ void smx_cluster_arrive() {
    asm volatile("barrier.cluster.arrive.aligned;\n" : : : "memory");
}

__device__ __forceinline__ void smx_cluster_wait() {
    asm volatile("barrier.cluster.wait.aligned;\n" : : : "memory");
}

// Per-thread stage: thread max m_t over its VPT uint4 chunks (8 bf16 each), e = exp(x - m_t)
// kept in registers, s_t = sum of e. Invalid chunks are filled with -inf (contribute 0).
template <int VPT>
__device__ __forceinline__ void smx_thread_stage(const uint4 (&raw)[VPT], float (&e)[VPT * 8],
                                                 float& m_t, float& s_t) {
    __nv_bfloat162 t[VPT];
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        t[i] = __hmax2(__hmax2(smx_as_bf162(raw[i].x), smx_as_bf162(raw[i].y)),
                       __hmax2(smx_as_bf162(raw[i].z), smx_as_bf162(raw[i].w)));
    }
#pragma unroll
    for (int st = 1; st < VPT; st <<= 1) {
#pragma unroll
        for (int i = 0; i + st < VPT; i += 2 * st) t[i] = __hmax2(t[i], t[i + st]);
    }
    m_t = fmaxf(__low2float(t[0]), __high2float(t[0]));
    const float mL = smx_guard(m_t) * SMX_LOG2E;

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const float lo = __uint_as_float(w[q] << 16);
            const float hi = __uint_as_float(w[q] & 0xFFFF0000u);
            const float a = smx_ex2(fmaf(lo, SMX_LOG2E, -mL));
            const float b = smx_ex2(fmaf(hi, SMX_LOG2E, -mL));
            e[i * 8 + 2 * q] = a;
            e[i * 8 + 2 * q + 1] = b;
            acc[q] += a + b;
        }
    }
    s_t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// Block-wide reduction of (max, sum-relative-to-max) pairs. blockDim.x must be a multiple of 32
// and <= 1024. Every thread gets the block result (no second barrier needed).
__device__ __forceinline__ void smx_block_reduce_pair(float m_t, float s_t, float* red_m,
                                                      float* red_s, float& M, float& S) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;

    const float Mw = smx_warp_max(m_t);
    const float Mws = smx_guard(Mw);
    const float sw = smx_warp_sum(s_t * smx_ex2((m_t - Mws) * SMX_LOG2E));
    if (lane == 0) {
        red_m[warp] = Mw;
        red_s[warp] = sw;
    }
    __syncthreads();
    float Mb = red_m[0];
    for (int w = 1; w < nwarps; ++w) Mb = fmaxf(Mb, red_m[w]);
    const float Mbs = smx_guard(Mb);
    float Sb = 0.0f;
    for (int w = 0; w < nwarps; ++w) Sb += red_s[w] * smx_ex2((red_m[w] - Mbs) * SMX_LOG2E);
    M = Mb;
    S = Sb;
}

// ------------------------------------------------------------------------------------------
// Cluster-split kernel: grid = N * CS CTAs, cluster = CS CTAs = one row.
// Each CTA handles `chunks` uint4 (8 bf16) of its row; chunk k = tid + i * blockDim.x.
// ------------------------------------------------------------------------------------------
template <int CS, int VPT>
__global__ void __launch_bounds__(256)
softmax_bf16_slice_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                          int C, int chunks) {
    __shared__ float red_m[32];
    __shared__ float red_s[32];
    __shared__ float2 cl_pair;

    const int tid = threadIdx.x;
    const int nthr = blockDim.x;

    int rank = 0;
    if (CS > 1) rank = (int)cg::this_cluster().block_rank();
    const size_t row = (size_t)(blockIdx.x / CS);
    const size_t off = row * (size_t)C + (size_t)rank * (size_t)chunks * 8u;
    const uint4* __restrict__ src = reinterpret_cast<const uint4*>(in + off);
    uint4* __restrict__ dst = reinterpret_cast<uint4*>(out + off);

    // Issue every load of this thread before any use.
    uint4 raw[VPT];
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int k = tid + i * nthr;
        if (k < chunks) {
            raw[i] = __ldg(src + k);
        } else {
            raw[i] = make_uint4(SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2,
                                SMX_NEG_INF_BF16X2);
        }
    }

    float e[VPT * 8];
    float m_t, s_t;
    smx_thread_stage<VPT>(raw, e, m_t, s_t);

    float M, S;
    smx_block_reduce_pair(m_t, s_t, red_m, red_s, M, S);

    if (CS > 1) {
        cg::cluster_group cluster = cg::this_cluster();
        if (tid == 0) cl_pair = make_float2(M, S);
        cluster.sync();  // pairs visible cluster-wide; also guarantees all CTAs have started
        float2 p[CS];
#pragma unroll
        for (int r = 0; r < CS; ++r) p[r] = *cluster.map_shared_rank(&cl_pair, (unsigned)r);
        float Mc = p[0].x;
#pragma unroll
        for (int r = 1; r < CS; ++r) Mc = fmaxf(Mc, p[r].x);
        const float Mcs = smx_guard(Mc);
        float Sc = 0.0f;
#pragma unroll
        for (int r = 0; r < CS; ++r) Sc += p[r].y * smx_ex2((p[r].x - Mcs) * SMX_LOG2E);
        M = Mc;
        S = Sc;
        smx_cluster_arrive();  // done reading remote shared memory
    }

    const float Ms = smx_guard(M);
    const float f = smx_ex2((smx_guard(m_t) - Ms) * SMX_LOG2E) / S;

#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int k = tid + i * nthr;
        if (k < chunks) {
            uint4 o;
            o.x = smx_pack_bf16x2(e[i * 8 + 0] * f, e[i * 8 + 1] * f);
            o.y = smx_pack_bf16x2(e[i * 8 + 2] * f, e[i * 8 + 3] * f);
            o.z = smx_pack_bf16x2(e[i * 8 + 4] * f, e[i * 8 + 5] * f);
            o.w = smx_pack_bf16x2(e[i * 8 + 6] * f, e[i * 8 + 7] * f);
            dst[k] = o;
        }
    }

    if (CS > 1) smx_cluster_wait();  // no CTA exits while its shared memory may still be read
}

// ------------------------------------------------------------------------------------------
// Warp-per-row kernel for C <= 1024 (C % 8 == 0): 4 rows per 128-thread CTA.
// ------------------------------------------------------------------------------------------
template <int VPT>
__global__ void __launch_bounds__(128)
softmax_bf16_warp_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                         int N, int C) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= N) return;  // whole warp exits together
    const int chunks = C >> 3;
    const size_t off = (size_t)row * (size_t)C;
    const uint4* __restrict__ src = reinterpret_cast<const uint4*>(in + off);
    uint4* __restrict__ dst = reinterpret_cast<uint4*>(out + off);

    uint4 raw[VPT];
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int k = lane + i * 32;
        if (k < chunks) {
            raw[i] = __ldg(src + k);
        } else {
            raw[i] = make_uint4(SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2, SMX_NEG_INF_BF16X2,
                                SMX_NEG_INF_BF16X2);
        }
    }

    float e[VPT * 8];
    float m_t, s_t;
    smx_thread_stage<VPT>(raw, e, m_t, s_t);

    const float Mw = smx_warp_max(m_t);
    const float Ms = smx_guard(Mw);
    const float S = smx_warp_sum(s_t * smx_ex2((m_t - Ms) * SMX_LOG2E));
    const float f = smx_ex2((smx_guard(m_t) - Ms) * SMX_LOG2E) / S;

#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int k = lane + i * 32;
        if (k < chunks) {
            uint4 o;
            o.x = smx_pack_bf16x2(e[i * 8 + 0] * f, e[i * 8 + 1] * f);
            o.y = smx_pack_bf16x2(e[i * 8 + 2] * f, e[i * 8 + 3] * f);
            o.z = smx_pack_bf16x2(e[i * 8 + 4] * f, e[i * 8 + 5] * f);
            o.w = smx_pack_bf16x2(e[i * 8 + 6] * f, e[i * 8 + 7] * f);
            dst[k] = o;
        }
    }
}

// ------------------------------------------------------------------------------------------
// Generic fallback: any C, any alignment. One CTA per row, looping online softmax.
// ------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256)
softmax_bf16_generic_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                            int C) {
    __shared__ float red_m[32];
    __shared__ float red_s[32];

    const size_t off = (size_t)blockIdx.x * (size_t)C;
    const __nv_bfloat16* __restrict__ x = in + off;
    __nv_bfloat16* __restrict__ y = out + off;

    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float v = __bfloat162float(x[j]);
        const float mn = fmaxf(m, v);
        const float ms = smx_guard(mn);
        s = s * smx_ex2((m - ms) * SMX_LOG2E) + smx_ex2((v - ms) * SMX_LOG2E);
        m = mn;
    }

    float M, S;
    smx_block_reduce_pair(m, s, red_m, red_s, M, S);
    const float mL = smx_guard(M) * SMX_LOG2E;
    const float inv = 1.0f / S;

    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float v = __bfloat162float(x[j]);
        y[j] = __float2bfloat16_rn(smx_ex2(fmaf(v, SMX_LOG2E, -mL)) * inv);
    }
}

// ------------------------------------------------------------------------------------------
// Host side
// ------------------------------------------------------------------------------------------
template <int CS, int VPT>
static cudaError_t smx_launch_slice(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C,
                                    int chunks, int threads) {
    if (CS == 1) {
        softmax_bf16_slice_kernel<CS, VPT><<<(unsigned)N, (unsigned)threads>>>(out, in, C, chunks);
        return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(N * CS), 1, 1);
    cfg.blockDim = dim3((unsigned)threads, 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = 0;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CS;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, softmax_bf16_slice_kernel<CS, VPT>, out, in, C, chunks);
}

template <int CS>
static cudaError_t smx_launch_slice_cs(int vpt, __nv_bfloat16* out, const __nv_bfloat16* in,
                                       int N, int C, int chunks, int threads) {
    switch (vpt) {
        case 1: return smx_launch_slice<CS, 1>(out, in, N, C, chunks, threads);
        case 2: return smx_launch_slice<CS, 2>(out, in, N, C, chunks, threads);
        case 4: return smx_launch_slice<CS, 4>(out, in, N, C, chunks, threads);
        default: return smx_launch_slice<CS, 8>(out, in, N, C, chunks, threads);
    }
}

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        bool done = false;
        const bool aligned =
            ((reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(input)) & 15u) == 0;
        if (aligned && (C & 7) == 0) {
            if (C <= 1024) {
                // One warp per row, 4 rows per CTA.
                const int chunks = C >> 3;
                const int vpt = (chunks + 31) >> 5;  // 1..4
                const unsigned grid = (unsigned)(((long long)N + 3) / 4);
                if (vpt <= 1) {
                    softmax_bf16_warp_kernel<1><<<grid, 128>>>(out, input, N, C);
                } else if (vpt <= 2) {
                    softmax_bf16_warp_kernel<2><<<grid, 128>>>(out, input, N, C);
                } else {
                    softmax_bf16_warp_kernel<4><<<grid, 128>>>(out, input, N, C);
                }
                done = (cudaGetLastError() == cudaSuccess);
            } else {
                // One cluster of cs CTAs per row, ~128 CTAs in total for small N.
                int cs = 1;
                if (N < 128) {
                    const int t = 128 / N;
                    cs = (t >= 8) ? 8 : ((t >= 4) ? 4 : ((t >= 2) ? 2 : 1));
                }
                while (cs > 1 && (C % (8 * cs)) != 0) cs >>= 1;
                const int chunks = C / (8 * cs);
                const int vpt = (chunks <= 256)    ? 1
                                : (chunks <= 512)  ? 2
                                : (chunks <= 1024) ? 4
                                : (chunks <= 2048) ? 8
                                                   : 0;
                if (vpt > 0) {
                    const int threads = (((chunks + vpt - 1) / vpt) + 31) & ~31;  // <= 256
                    cudaError_t err;
                    switch (cs) {
                        case 8: err = smx_launch_slice_cs<8>(vpt, out, input, N, C, chunks, threads); break;
                        case 4: err = smx_launch_slice_cs<4>(vpt, out, input, N, C, chunks, threads); break;
                        case 2: err = smx_launch_slice_cs<2>(vpt, out, input, N, C, chunks, threads); break;
                        default: err = smx_launch_slice_cs<1>(vpt, out, input, N, C, chunks, threads); break;
                    }
                    if (err == cudaSuccess) {
                        done = true;
                    } else {
                        (void)cudaGetLastError();  // clear and fall back
                    }
                }
            }
        }
        if (!done) {
            const int threads = (C >= 256) ? 256 : ((C + 31) & ~31);
            softmax_bf16_generic_kernel<<<(unsigned)N, (unsigned)threads>>>(out, input, C);
        }
    }
    cudaDeviceSynchronize();
}
