// softmax_bf16 for sm_90a: TMA 1-D bulk copies (cp.async.bulk + mbarrier chunks) of each row
// (or row slice, split across a thread-block cluster for small N) into shared memory, an fp32
// online (max, sum) pipelined behind the chunk arrivals, a block/cluster (m, s) reduction, and a
// second pass from shared memory that rounds once to bf16 and writes with 16-byte stores.
// Small C uses a warp-per-row register kernel; any shape/alignment falls back to generic kernels.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define SM_L2E 1.4426950408889634f
#define FULL_MASK 0xffffffffu
#define NEG_INF_BF2 0xFF80FF80u

static constexpr int TMA_THREADS = 256;
static constexpr int TMA_NWARPS = TMA_THREADS / 32;
static constexpr int TMA_MAX_CHUNKS = 8;
static constexpr int TMA_MIN_CHUNK_VECS = 256;            // 4 KB minimum chunk
static constexpr int TMA_MAX_DYN_SMEM = 200 * 1024;        // bytes of row slice in smem
static constexpr int CLUSTER_MIN_SLICE = 2048;             // elements per CTA when splitting
static constexpr int MAX_CLUSTER = 8;                      // portable cluster size
static constexpr int GEN_THREADS = 256;

// ------------------------------------------------------------------------------------------
// Device helpers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ void unpack8(const uint4& q, float* f) {
    f[0] = bf_lo(q.x); f[1] = bf_hi(q.x);
    f[2] = bf_lo(q.y); f[3] = bf_hi(q.y);
    f[4] = bf_lo(q.z); f[5] = bf_hi(q.z);
    f[6] = bf_lo(q.w); f[7] = bf_hi(q.w);
}

// lo -> low 16 bits (lower address), hi -> high 16 bits; round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Combine two online-softmax partials (max, sum of exp(x - max)). Safe for empty partials
// (m = -inf, s = 0). Bitwise commutative, so xor-butterflies give identical results in all lanes.
__device__ __forceinline__ void ms_combine(float& m, float& s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    const float a = (m == -INFINITY) ? 0.f : s * exp2f((m - mn) * SM_L2E);
    const float b = (m2 == -INFINITY) ? 0.f : s2 * exp2f((m2 - mn) * SM_L2E);
    m = mn;
    s = a + b;
}

__device__ __forceinline__ void warp_reduce_ms(float& m, float& s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(FULL_MASK, m, o);
        const float s2 = __shfl_xor_sync(FULL_MASK, s, o);
        ms_combine(m, s, m2, s2);
    }
}

__device__ __forceinline__ float block_allreduce_max(float v, float* red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();                       // protect red[] from a previous use
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = (lane < nw) ? red[lane] : -INFINITY;
    return warp_max(v);
}

__device__ __forceinline__ float block_allreduce_sum(float v, float* red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = (lane < nw) ? red[lane] : 0.f;
    return warp_sum(v);
}

// ---- mbarrier / TMA / cluster primitives (sm_90) ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n\t"
            ".reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.b32 %0, 1, 0, p;\n\t"
            "}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

__device__ __forceinline__ void tma_load_1d(uint32_t dst_smem, const void* src_gmem,
                                            uint32_t bytes, uint32_t bar) {
    const unsigned long long src =
        static_cast<unsigned long long>(__cvta_generic_to_global(src_gmem));
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
        :: "r"(dst_smem), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive;\n" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait;\n" ::: "memory");
}

__device__ __forceinline__ float ld_dsmem_f32(const float* local_ptr, uint32_t rank) {
    const uint32_t a = smem_u32(local_ptr);
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(a), "r"(rank));
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(ra) : "memory");
    return v;
}

// ------------------------------------------------------------------------------------------
// Main kernel: one CTA per row slice; cl CTAs (a cluster when cl > 1) per row.
// Requires: C % 8 == 0, L % 8 == 0, 16-byte aligned in/out.
// ------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(TMA_THREADS)
softmax_tma_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                   int C, int L, int cl, int chunk_vecs, int nchunks) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long s_bar[TMA_MAX_CHUNKS];
    __shared__ float s_red_m[TMA_NWARPS];
    __shared__ float s_red_s[TMA_NWARPS];
    __shared__ float s_part[2];
    __shared__ float s_fin[2];

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int row = (int)(blockIdx.x / (unsigned)cl);
    const int rank = (int)(blockIdx.x - (unsigned)row * (unsigned)cl);
    const size_t base = (size_t)row * (size_t)C + (size_t)rank * (size_t)L;
    const int Lv = L >> 3;

    const uint32_t s_data = smem_u32(smem_raw);
    const uint32_t bar0 = smem_u32(&s_bar[0]);

    // ---- issue every chunk's bulk copy at once ----
    if (tid == 0) {
        for (int k = 0; k < nchunks; ++k) mbar_init(bar0 + 8u * (uint32_t)k, 1u);
        fence_mbar_init();
        const char* src = reinterpret_cast<const char*>(in + base);
        for (int k = 0; k < nchunks; ++k) {
            const int v0 = k * chunk_vecs;
            const int rem = Lv - v0;
            const int nvk = rem < chunk_vecs ? rem : chunk_vecs;
            const uint32_t bytes = (uint32_t)nvk * 16u;
            const uint32_t bar = bar0 + 8u * (uint32_t)k;
            mbar_expect_tx(bar, bytes);
            tma_load_1d(s_data + (uint32_t)v0 * 16u, src + (size_t)v0 * 16, bytes, bar);
        }
    }
    __syncthreads();   // barriers initialised before anyone waits on them

    // ---- pass 1: online (max, sum) pipelined behind chunk arrivals ----
    const uint4* sv = reinterpret_cast<const uint4*>(smem_raw);
    float m = -INFINITY, s = 0.f;
    for (int k = 0; k < nchunks; ++k) {
        mbar_wait(bar0 + 8u * (uint32_t)k, 0u);          // every thread waits on every chunk
        const int vend = min((k + 1) * chunk_vecs, Lv);
        for (int v = k * chunk_vecs + tid; v < vend; v += TMA_THREADS) {
            const uint4 q = sv[v];
            float f[8];
            unpack8(q, f);
            const float cm = fmaxf(fmaxf(fmaxf(f[0], f[1]), fmaxf(f[2], f[3])),
                                   fmaxf(fmaxf(f[4], f[5]), fmaxf(f[6], f[7])));
            if (cm > m) {                                  // m = -inf -> exp2(-inf) = 0, s = 0
                s *= exp2f((m - cm) * SM_L2E);
                m = cm;
            }
            const float nmL = -(m * SM_L2E);
            float t = 0.f;
#pragma unroll
            for (int i = 0; i < 8; ++i) t += exp2f(fmaf(f[i], SM_L2E, nmL));
            s += t;
        }
    }

    // ---- block reduction of (m, s) ----
    warp_reduce_ms(m, s);
    if (lane == 0) { s_red_m[warp] = m; s_red_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        float bm = (lane < TMA_NWARPS) ? s_red_m[lane] : -INFINITY;
        float bs = (lane < TMA_NWARPS) ? s_red_s[lane] : 0.f;
        warp_reduce_ms(bm, bs);
        if (lane == 0) {
            if (cl > 1) { s_part[0] = bm; s_part[1] = bs; }
            else        { s_fin[0] = bm;  s_fin[1] = bs; }
        }
    }

    // ---- cluster exchange through DSMEM ----
    if (cl > 1) {
        cluster_arrive();          // release: s_part written
        cluster_wait();            // acquire: every CTA's s_part visible
        if (warp == 0) {
            float pm = -INFINITY, ps = 0.f;
            if (lane < cl) {
                pm = ld_dsmem_f32(&s_part[0], (uint32_t)lane);
                ps = ld_dsmem_f32(&s_part[1], (uint32_t)lane);
            }
            warp_reduce_ms(pm, ps);
            if (lane == 0) { s_fin[0] = pm; s_fin[1] = ps; }
        }
        cluster_arrive();          // done reading remote smem; waited for before exit
    }
    __syncthreads();

    const float M = s_fin[0];
    const float S = s_fin[1];
    const float c = fmaf(M, SM_L2E, log2f(S));   // out = exp2(x*log2e - c) = exp(x - M) / S

    // ---- pass 2: from shared memory, round once, 16-byte coalesced stores ----
    uint4* yv = reinterpret_cast<uint4*>(out + base);
#pragma unroll 4
    for (int v = tid; v < Lv; v += TMA_THREADS) {
        const uint4 q = sv[v];
        uint4 o;
        o.x = pack_bf16x2(exp2f(fmaf(bf_lo(q.x), SM_L2E, -c)), exp2f(fmaf(bf_hi(q.x), SM_L2E, -c)));
        o.y = pack_bf16x2(exp2f(fmaf(bf_lo(q.y), SM_L2E, -c)), exp2f(fmaf(bf_hi(q.y), SM_L2E, -c)));
        o.z = pack_bf16x2(exp2f(fmaf(bf_lo(q.z), SM_L2E, -c)), exp2f(fmaf(bf_hi(q.z), SM_L2E, -c)));
        o.w = pack_bf16x2(exp2f(fmaf(bf_lo(q.w), SM_L2E, -c)), exp2f(fmaf(bf_hi(q.w), SM_L2E, -c)));
        yv[v] = o;
    }

    if (cl > 1) cluster_wait();    // no CTA exits while a peer may still read its s_part
}

// ------------------------------------------------------------------------------------------
// Small C (C % 8 == 0, aligned, C <= 32*8*VPL): one warp per row, data held in registers.
// ------------------------------------------------------------------------------------------
template <int VPL>
__global__ void __launch_bounds__(128)
softmax_warp_vec_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                        int N, int C) {
    const int lane = threadIdx.x & 31;
    const int row = (int)blockIdx.x * (int)(blockDim.x >> 5) + (int)(threadIdx.x >> 5);
    if (row >= N) return;                       // warp-uniform
    const int nv = C >> 3;
    const uint4* x = reinterpret_cast<const uint4*>(in + (size_t)row * C);
    uint4* y = reinterpret_cast<uint4*>(out + (size_t)row * C);

    float f[VPL * 8];
#pragma unroll
    for (int i = 0; i < VPL; ++i) {
        const int idx = lane + 32 * i;
        uint4 q = make_uint4(NEG_INF_BF2, NEG_INF_BF2, NEG_INF_BF2, NEG_INF_BF2);
        if (idx < nv) q = __ldg(x + idx);
        unpack8(q, &f[8 * i]);
    }

    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < VPL * 8; ++j) m = fmaxf(m, f[j]);
    m = warp_max(m);

    const float nmL = -(m * SM_L2E);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < VPL * 8; ++j) {
        f[j] = exp2f(fmaf(f[j], SM_L2E, nmL));   // padding: exp2(-inf) = 0
        s += f[j];
    }
    s = warp_sum(s);
    const float inv = 1.0f / s;

#pragma unroll
    for (int i = 0; i < VPL; ++i) {
        const int idx = lane + 32 * i;
        if (idx < nv) {
            uint4 o;
            o.x = pack_bf16x2(f[8 * i + 0] * inv, f[8 * i + 1] * inv);
            o.y = pack_bf16x2(f[8 * i + 2] * inv, f[8 * i + 3] * inv);
            o.z = pack_bf16x2(f[8 * i + 4] * inv, f[8 * i + 5] * inv);
            o.w = pack_bf16x2(f[8 * i + 6] * inv, f[8 * i + 7] * inv);
            y[idx] = o;
        }
    }
}

// ------------------------------------------------------------------------------------------
// Generic fallbacks: any N, any C, any alignment (scalar loads).
// ------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(GEN_THREADS)
softmax_warp_generic_kernel(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    const int lane = threadIdx.x & 31;
    const int row = (int)blockIdx.x * (int)(blockDim.x >> 5) + (int)(threadIdx.x >> 5);
    if (row >= N) return;                       // warp-uniform
    const __nv_bfloat16* x = in + (size_t)row * C;
    __nv_bfloat16* y = out + (size_t)row * C;

    float m = -INFINITY;
    for (int j = lane; j < C; j += 32) m = fmaxf(m, __bfloat162float(x[j]));
    m = warp_max(m);
    const float nmL = -(m * SM_L2E);
    float s = 0.f;
    for (int j = lane; j < C; j += 32) s += exp2f(fmaf(__bfloat162float(x[j]), SM_L2E, nmL));
    s = warp_sum(s);
    const float c = fmaf(m, SM_L2E, log2f(s));
    for (int j = lane; j < C; j += 32)
        y[j] = __float2bfloat16_rn(exp2f(fmaf(__bfloat162float(x[j]), SM_L2E, -c)));
}

__global__ void __launch_bounds__(GEN_THREADS)
softmax_block_generic_kernel(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    __shared__ float red[32];
    const int row = (int)blockIdx.x;
    if (row >= N) return;                       // block-uniform
    const __nv_bfloat16* x = in + (size_t)row * C;
    __nv_bfloat16* y = out + (size_t)row * C;

    float m = -INFINITY;
    for (int j = threadIdx.x; j < C; j += blockDim.x) m = fmaxf(m, __bfloat162float(x[j]));
    m = block_allreduce_max(m, red);
    const float nmL = -(m * SM_L2E);
    float s = 0.f;
    for (int j = threadIdx.x; j < C; j += blockDim.x)
        s += exp2f(fmaf(__bfloat162float(x[j]), SM_L2E, nmL));
    s = block_allreduce_sum(s, red);
    const float c = fmaf(m, SM_L2E, log2f(s));
    for (int j = threadIdx.x; j < C; j += blockDim.x)
        y[j] = __float2bfloat16_rn(exp2f(fmaf(__bfloat162float(x[j]), SM_L2E, -c)));
}

// ------------------------------------------------------------------------------------------
// Host side
// ------------------------------------------------------------------------------------------
static int get_num_sms() {
    static int sms = 0;
    if (sms <= 0) {
        int dev = 0;
        int v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            v <= 0) {
            cudaGetLastError();
            v = 132;
        }
        sms = v;
    }
    return sms;
}

static cudaError_t launch_tma(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C, int cl) {
    const int L = C / cl;
    const int Lv = L >> 3;
    if (Lv <= 0) return cudaErrorInvalidValue;
    int chunk_vecs = (Lv + TMA_MAX_CHUNKS - 1) / TMA_MAX_CHUNKS;
    if (chunk_vecs < TMA_MIN_CHUNK_VECS) chunk_vecs = TMA_MIN_CHUNK_VECS;
    const int nchunks = (Lv + chunk_vecs - 1) / chunk_vecs;   // <= TMA_MAX_CHUNKS
    const size_t smem = (size_t)Lv * 16;
    if (smem > (size_t)TMA_MAX_DYN_SMEM) return cudaErrorInvalidValue;
    if (smem > 48 * 1024) {
        static int attr_state = 0;   // 0 unknown, 1 ok, -1 failed
        if (attr_state == 0) {
            if (cudaFuncSetAttribute(softmax_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     TMA_MAX_DYN_SMEM) == cudaSuccess) {
                attr_state = 1;
            } else {
                cudaGetLastError();
                attr_state = -1;
            }
        }
        if (attr_state < 0) return cudaErrorInvalidValue;
    }

    if (cl == 1) {
        softmax_tma_kernel<<<(unsigned)N, TMA_THREADS, smem>>>(out, in, C, L, 1, chunk_vecs,
                                                                 nchunks);
        return cudaGetLastError();
    }

    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDim = dim3((unsigned)N * (unsigned)cl, 1, 1);
    cfg.blockDim = dim3(TMA_THREADS, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    cudaLaunchAttribute attr[1];
    memset(attr, 0, sizeof(attr));
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cl;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, softmax_tma_kernel, out, in, C, L, cl, chunk_vecs,
                                       nchunks);
    if (e != cudaSuccess) cudaGetLastError();
    return e;
}

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        const bool vec_ok =
            ((C & 7) == 0) &&
            ((((uintptr_t)out) | ((uintptr_t)input)) & (uintptr_t)15) == 0;
        bool done = false;

        if (vec_ok && C <= 1024) {
            const int rows_per_block = 4;                      // 128 threads, warp per row
            const unsigned grid = (unsigned)((N + rows_per_block - 1) / rows_per_block);
            const int nv = C >> 3;
            if (nv <= 32)
                softmax_warp_vec_kernel<1><<<grid, 128>>>(out, input, N, C);
            else if (nv <= 64)
                softmax_warp_vec_kernel<2><<<grid, 128>>>(out, input, N, C);
            else
                softmax_warp_vec_kernel<4><<<grid, 128>>>(out, input, N, C);
            done = true;
        } else if (vec_ok) {
            // Split a row across a cluster when there are few rows, aiming at ~1 CTA per SM.
            const int sms = get_num_sms();
            int cl = 1;
            while (cl < MAX_CLUSTER && (long long)N * (long long)(cl * 2) <= (long long)sms &&
                   (C % (8 * cl * 2)) == 0 && C / (cl * 2) >= CLUSTER_MIN_SLICE)
                cl *= 2;
            if (cl > 1 && launch_tma(out, input, N, C, cl) == cudaSuccess) done = true;
            if (!done && launch_tma(out, input, N, C, 1) == cudaSuccess) done = true;
        }

        if (!done) {
            if (C <= 1024) {
                const int rows_per_block = GEN_THREADS / 32;
                const unsigned grid = (unsigned)((N + rows_per_block - 1) / rows_per_block);
                softmax_warp_generic_kernel<<<grid, GEN_THREADS>>>(out, input, N, C);
            } else {
                softmax_block_generic_kernel<<<(unsigned)N, GEN_THREADS>>>(out, input, N, C);
            }
        }
    }
    cudaDeviceSynchronize();
}
