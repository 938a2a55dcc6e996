// top_k (fp32): the k largest of input[N] in descending order with their int32 positions;
// equal values ordered by ascending index.
//
// Fast path (N <= 65536, k <= 1024): one launch.
//   * N <= 16384: one ordinary block of 1024 threads (no cluster attribute), up to 16 keys
//     per thread.
//   * 16384 < N <= 65536: one thread-block cluster (8 blocks x 8 keys per thread by default;
//     build with -DTK_N64_CS=4 for 4 blocks x 16 keys per thread).
// Registers hold only the 32-bit order-preserving value bits m (with -0.0 canonicalised to
// +0.0) plus a "was -0.0" bit mask; the full unique 64-bit key
//   key = m << 32 | ((0x7fffffff - index) << 1 | negz)
// is built on the fly only when the radix select reaches the index bits, and at the gather.
// "descending key" == "descending value, ties by ascending index".
// MSB radix select: an 8-bit first digit (lane-private conflict-free histogram), then 12-bit
// digits (4096 bins, each thread owns 4 consecutive bins; cluster histograms combined via
// one uint4 DSMEM load per rank). Inside the radix loop the cluster barrier is a light one:
// __syncthreads, warp 0 arrives with release, warps 1..31 arrive relaxed, all wait (acquire).
// Candidates (keys >= final prefix, about k + 16 for smooth data) are gathered into block 0,
// ranked exactly, and the outputs are written; the value is rebuilt from the key (no re-read
// of the input).
// Fallback (larger shapes or a failed launch): a self-contained bitonic sort of the same keys.
#ifndef NVTX_DISABLE
#define NVTX_DISABLE
#endif
#ifndef CCCL_DISABLE_NVTX
#define CCCL_DISABLE_NVTX
#endif
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdint.h>
#include <string.h>

namespace cg = cooperative_groups;

typedef unsigned long long u64;

#define TK_THREADS 1024
#define TK_CAND_CAP 2048
#define TK_HBINS 4096
#define TK_FAST_MAX_N 65536
#define TK_FAST_MAX_K 1024
#define TK_FULL 0xffffffffu

// Cluster shape for 32768 < N <= 65536: 8 blocks x R=8 (default) or 4 blocks x R=16.
#ifndef TK_N64_CS
#define TK_N64_CS 8
#endif
#if TK_N64_CS == 4
#define TK_N64_R 16
#else
#undef TK_N64_CS
#define TK_N64_CS 8
#define TK_N64_R 8
#endif

// ------------------------------------------------------------------------------------------
// Key helpers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ void tk_convert(float v, unsigned& m, unsigned& nz) {
    unsigned u = __float_as_uint(v);
    nz = (u == 0x80000000u) ? 1u : 0u;     // -0.0 == +0.0 for ordering; remembered in nz
    if (nz) u = 0u;
    m = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ u64 tk_key(unsigned m, unsigned idx, unsigned nz) {
    return ((u64)m << 32) | (u64)(((0x7fffffffu - idx) << 1) | nz);
}

__device__ __forceinline__ u64 tk_make_key(float v, unsigned idx) {
    unsigned m, nz;
    tk_convert(v, m, nz);
    return tk_key(m, idx, nz);
}

__device__ __forceinline__ int tk_key_index(u64 key) {
    return (int)(0x7fffffffu - ((unsigned)(key & 0xFFFFFFFFull) >> 1));
}

__device__ __forceinline__ float tk_key_value(u64 key) {
    const unsigned m = (unsigned)(key >> 32);
    unsigned u = (m & 0x80000000u) ? (m & 0x7fffffffu) : ~m;
    if ((unsigned)key & 1u) u = 0x80000000u;
    return __uint_as_float(u);
}

// Position of register slot r of thread t inside its block's chunk.
template <int R>
__device__ __forceinline__ int tk_pos(int r, int t) {
    return (R >= 4) ? ((r >> 2) * (TK_THREADS * 4) + t * 4 + (r & 3)) : (r * TK_THREADS + t);
}

// ------------------------------------------------------------------------------------------
// Shared memory layout of the fast kernel (dynamic, ~64 KB)
// ------------------------------------------------------------------------------------------
struct __align__(16) TkSmem {
    union {
        unsigned lp[256 * 32];     // pass-0 histogram, one counter per (bin, lane): 32 KB
        u64 cand[TK_CAND_CAP];     // gathered candidates (block 0 only), 16 KB. Written only
                                   // after >= 1 cluster barrier that follows the last lp read.
    } u;
    unsigned hist[2][TK_HBINS];    // per-pass block histograms (double-buffered), 32 KB
    unsigned wtot[32];
    unsigned res_digit;
    unsigned res_gt;
    unsigned res_eq;
    unsigned res_base;
    unsigned cand_count;
};

template <int CS, typename T>
__device__ __forceinline__ T* tk_remote(T* p, int r) {
    if (CS == 1) return p;
    return cg::this_cluster().map_shared_rank(p, (unsigned)r);
}

// Light cluster barrier: only this block's shared-memory histogram (complete at the
// __syncthreads) must be published; warp 0's release (cumulative) orders it for the remote
// readers, the other warps arrive relaxed. The wait has acquire semantics.
__device__ __forceinline__ void tk_cluster_barrier_light(int warp) {
    __syncthreads();
    if (warp == 0) asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory");
    else           asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

// ------------------------------------------------------------------------------------------
// Fast kernel: CS blocks (one cluster when CS > 1), 1024 threads, R keys per thread.
// ------------------------------------------------------------------------------------------
template <int R, int CS>
__global__ void __launch_bounds__(TK_THREADS, 1)
tk_fast_kernel(const float* __restrict__ input, float* __restrict__ out_v,
               int* __restrict__ out_i, int N, int kk, int stop)
{
    static_assert(R >= 1 && R <= 16, "R out of range");
    extern __shared__ __align__(16) unsigned char tk_smem_raw[];
    TkSmem& sm = *reinterpret_cast<TkSmem*>(tk_smem_raw);

    const int t = (int)threadIdx.x;
    const int lane = t & 31;
    const int warp = t >> 5;
    int crank = 0;
    if (CS > 1) crank = (int)cg::this_cluster().block_rank();

    // ---- zero shared state ----------------------------------------------------------------
    {
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        uint4* lp4 = reinterpret_cast<uint4*>(sm.u.lp);
        uint4* h4 = reinterpret_cast<uint4*>(&sm.hist[0][0]);
        lp4[t] = z;
        lp4[t + TK_THREADS] = z;
        h4[t] = z;
        h4[t + TK_THREADS] = z;
        if (t == 0) sm.cand_count = 0u;
    }

    // ---- load the chunk into registers (32-bit ordered values) ---------------------------
    unsigned m[R];
    unsigned vmask = 0u, nzmask = 0u;
    const int cbase = crank * (TK_THREADS * R);
    {
        const bool vec = ((reinterpret_cast<uintptr_t>(input) & (uintptr_t)15) == 0);
        const int glast = cbase + ((R >= 4) ? ((R / 4 - 1) * (TK_THREADS * 4) + t * 4 + 3) : 0);
        if (R >= 4 && vec && glast < N) {
            float4 v[(R / 4) > 0 ? (R / 4) : 1];
#pragma unroll
            for (int q = 0; q < R / 4; ++q)
                v[q] = __ldg(reinterpret_cast<const float4*>(input + cbase + q * (TK_THREADS * 4) + t * 4));
#pragma unroll
            for (int q = 0; q < R / 4; ++q) {
                unsigned nz;
                tk_convert(v[q].x, m[4 * q + 0], nz); nzmask |= nz << (4 * q + 0);
                tk_convert(v[q].y, m[4 * q + 1], nz); nzmask |= nz << (4 * q + 1);
                tk_convert(v[q].z, m[4 * q + 2], nz); nzmask |= nz << (4 * q + 2);
                tk_convert(v[q].w, m[4 * q + 3], nz); nzmask |= nz << (4 * q + 3);
            }
            vmask = (1u << R) - 1u;
        } else {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int g = cbase + tk_pos<R>(r, t);
                if (g < N) {
                    unsigned nz;
                    tk_convert(__ldg(input + g), m[r], nz);
                    nzmask |= nz << r;
                    vmask |= 1u << r;
                } else {
                    m[r] = 0u;
                }
            }
        }
    }
    __syncthreads();

    // ---- MSB radix select --------------------------------------------------------------
    // Invariant: gt = #keys with (key >> shift) > pref, M = #keys with (key >> shift) >= pref,
    //            gt < kk <= M. (shift == 64 means "no prefix yet": all keys are candidates.)
    // Digits: 8 bits (63..56), then 12-bit digits (55..44, 43..32 | 31..20, 19..8), then 8.
    int shift = 64;
    u64 pref = 0ull;
    unsigned gt = 0u;
    unsigned M = (unsigned)N;
    int pass = 0;
    while (M > (unsigned)stop && shift > 0) {
        const int width = (shift == 64) ? 8 : (shift < 12 ? shift : 12);
        const int nshift = shift - width;
        unsigned* H = sm.hist[pass & 1];

        if (pass == 0) {
            // Lane-private histogram: counter (bin, lane) at bin*32 + lane -> bank == lane.
#pragma unroll
            for (int r = 0; r < R; ++r)
                if ((vmask >> r) & 1u)
                    atomicAdd(&sm.u.lp[((m[r] >> 24) << 5) + (unsigned)lane], 1u);
            __syncthreads();
            const int bin = t >> 2, part = t & 3;
            unsigned s = 0u;
#pragma unroll
            for (int i = 0; i < 8; ++i)
                s += sm.u.lp[(bin << 5) + ((part * 8 + i + bin) & 31)];
            s += __shfl_xor_sync(TK_FULL, s, 1);
            s += __shfl_xor_sync(TK_FULL, s, 2);
            if (part == 0) H[bin] = s;
        } else {
            const unsigned dmask = (1u << width) - 1u;
            if (nshift >= 32) {
                // Still inside the value bits: 32-bit work only.
                const int s32 = shift - 32;      // 0..24
                const int n32 = nshift - 32;
                const unsigned p32 = (unsigned)pref;
#pragma unroll
                for (int r = 0; r < R; ++r)
                    if (((vmask >> r) & 1u) && ((m[r] >> s32) == p32))
                        atomicAdd(&H[(m[r] >> n32) & dmask], 1u);
            } else {
                // Index bits (ties): build the full key on the fly.
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    if ((vmask >> r) & 1u) {
                        const u64 key = tk_key(m[r], (unsigned)(cbase + tk_pos<R>(r, t)),
                                               (nzmask >> r) & 1u);
                        if ((key >> shift) == pref)
                            atomicAdd(&H[(unsigned)(key >> nshift) & dmask], 1u);
                    }
                }
            }
        }

        if (CS > 1) tk_cluster_barrier_light(warp);
        else __syncthreads();

        // The other buffer held the previous pass's histogram; every remote read of it
        // happened before the barrier above, so it can be cleared for the next pass now.
        if (pass > 0)
            reinterpret_cast<uint4*>(sm.hist[(pass + 1) & 1])[t] = make_uint4(0u, 0u, 0u, 0u);

        unsigned c = 0u;
        uint4 a = make_uint4(0u, 0u, 0u, 0u);
        if (width == 12) {
            // Thread t owns bins 4t .. 4t+3.
#pragma unroll
            for (int r = 0; r < CS; ++r) {
                const uint4 v = *reinterpret_cast<const uint4*>(tk_remote<CS>(H, r) + 4 * t);
                a.x += v.x; a.y += v.y; a.z += v.z; a.w += v.w;
            }
            c = a.x + a.y + a.z + a.w;
        } else if (t < (1 << width)) {
#pragma unroll
            for (int r = 0; r < CS; ++r) c += tk_remote<CS>(H, r)[t];
        }

        // Block-wide suffix sum over thread groups (higher t == larger digits).
        unsigned x = c;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const unsigned y = __shfl_down_sync(TK_FULL, x, off);
            if (lane + off < 32) x += y;
        }
        if (lane == 0) sm.wtot[warp] = x;
        __syncthreads();
        unsigned wv = sm.wtot[lane];
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const unsigned y = __shfl_down_sync(TK_FULL, wv, off);
            if (lane + off < 32) wv += y;
        }
        unsigned above = __shfl_sync(TK_FULL, wv, (warp + 1) & 31);
        if (warp == 31) above = 0u;
        const unsigned suf = x + above;                 // #candidates in groups >= t
        const unsigned needed = (unsigned)kk - gt;      // >= 1
        if (c > 0u && suf >= needed && suf - c < needed) {
            unsigned d, g2, e;
            if (width == 12) {
                unsigned run = suf - c;
                const unsigned b = 4u * (unsigned)t;
                if (run + a.w >= needed) { d = b + 3u; g2 = run; e = a.w; }
                else {
                    run += a.w;
                    if (run + a.z >= needed) { d = b + 2u; g2 = run; e = a.z; }
                    else {
                        run += a.z;
                        if (run + a.y >= needed) { d = b + 1u; g2 = run; e = a.y; }
                        else { run += a.y; d = b; g2 = run; e = a.x; }
                    }
                }
            } else {
                d = (unsigned)t; g2 = suf - c; e = c;
            }
            sm.res_digit = d;
            sm.res_gt = g2;
            sm.res_eq = e;
        }
        __syncthreads();
        const unsigned d = sm.res_digit;
        gt += sm.res_gt;
        M = gt + sm.res_eq;
        pref = (pref << width) | (u64)d;
        shift = nshift;
        ++pass;
    }

    // Make sure block 0's zeroed counter is visible cluster-wide before remote atomics
    // (never taken in practice: a cluster launch always makes at least one pass).
    if (CS > 1 && pass == 0) cg::this_cluster().sync();

    // ---- gather candidates (keys >= prefix) into block 0's shared memory -----------------
    unsigned cnt = 0u;
    unsigned selm = 0u;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        bool s = ((vmask >> r) & 1u) != 0u;
        if (s && shift < 64) {
            if (shift >= 32) {
                s = ((m[r] >> (shift - 32)) >= (unsigned)pref);
            } else {
                const u64 key = tk_key(m[r], (unsigned)(cbase + tk_pos<R>(r, t)),
                                       (nzmask >> r) & 1u);
                s = ((key >> shift) >= pref);
            }
        }
        if (s) { selm |= 1u << r; ++cnt; }
    }
    unsigned inc = cnt;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const unsigned y = __shfl_up_sync(TK_FULL, inc, off);
        if (lane >= off) inc += y;
    }
    if (lane == 31) sm.wtot[warp] = inc;
    __syncthreads();
    unsigned wv2 = sm.wtot[lane];
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const unsigned y = __shfl_up_sync(TK_FULL, wv2, off);
        if (lane >= off) wv2 += y;
    }
    const unsigned wprev = __shfl_sync(TK_FULL, wv2, (warp + 31) & 31);
    const unsigned wexcl = (warp == 0) ? 0u : wprev;
    const unsigned btot = __shfl_sync(TK_FULL, wv2, 31);
    if (t == 0 && btot > 0u) {
        unsigned* cc = tk_remote<CS>(&sm.cand_count, 0);
        sm.res_base = atomicAdd(cc, btot);
    }
    __syncthreads();
    if (btot > 0u && cnt > 0u) {
        u64* cd = tk_remote<CS>(&sm.u.cand[0], 0);
        unsigned pos = sm.res_base + wexcl + inc - cnt;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if ((selm >> r) & 1u) {
                if (pos < (unsigned)TK_CAND_CAP)
                    cd[pos] = tk_key(m[r], (unsigned)(cbase + tk_pos<R>(r, t)), (nzmask >> r) & 1u);
                ++pos;
            }
        }
    }
    // Full (release/acquire from every thread) barrier: remote DSMEM stores of all warps
    // must be complete before block 0 reads the candidates.
    if (CS > 1) cg::this_cluster().sync();
    else __syncthreads();
    if (crank != 0) return;

    // ---- block 0: exact rank of every candidate, scatter the top kk ----------------------
    int M2 = (int)sm.cand_count;
    if (M2 > TK_CAND_CAP) M2 = TK_CAND_CAP;
    const int q = TK_THREADS / (M2 > 0 ? M2 : 1);
    int lgS = 0;
    while (lgS < 5 && (2 << lgS) <= q) ++lgS;
    const int S = 1 << lgS;             // threads cooperating on one candidate
    const int G = TK_THREADS >> lgS;    // candidates per round
    const int sub = t & (S - 1);
    for (int i0 = 0; i0 < M2; i0 += G) {
        const int i = i0 + (t >> lgS);
        const u64 mine = (i < M2) ? sm.u.cand[i] : ~0ull;
        unsigned rk = 0u;
#pragma unroll 4
        for (int j = sub; j < M2; j += S) rk += (sm.u.cand[j] > mine) ? 1u : 0u;
        for (int off = S >> 1; off > 0; off >>= 1) rk += __shfl_xor_sync(TK_FULL, rk, off);
        if (sub == 0 && i < M2 && rk < (unsigned)kk) {
            out_v[rk] = tk_key_value(mine);
            out_i[rk] = tk_key_index(mine);
        }
    }
}

// ------------------------------------------------------------------------------------------
// Fallback: bitonic sort (descending) of the keys in global memory (any N, any k)
// ------------------------------------------------------------------------------------------
__global__ void tk_fill_keys_kernel(const float* __restrict__ input, u64* __restrict__ keys,
                                    long long N, long long P) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < P;
         i += (long long)gridDim.x * blockDim.x)
        keys[i] = (i < N) ? tk_make_key(input[i], (unsigned)i) : 0ull;   // 0 < every real key
}

__global__ void tk_bitonic_step_kernel(u64* __restrict__ a, long long half,
                                       long long size, long long stride) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < half;
         t += (long long)gridDim.x * blockDim.x) {
        const long long i = ((t & ~(stride - 1)) << 1) | (t & (stride - 1));
        const long long j = i + stride;
        const u64 x = a[i];
        const u64 y = a[j];
        const bool desc = (i & size) == 0;
        if (desc ? (x < y) : (x > y)) { a[i] = y; a[j] = x; }
    }
}

__global__ void tk_split_kernel(const u64* __restrict__ keys, float* __restrict__ out_v,
                                int* __restrict__ out_i, int kk) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kk; i += gridDim.x * blockDim.x) {
        const u64 key = keys[i];
        out_v[i] = tk_key_value(key);
        out_i[i] = tk_key_index(key);
    }
}

static u64* g_tk_keys = nullptr;
static size_t g_tk_keys_n = 0;

static void tk_fallback(const float* input, float* out_v, int* out_i, int N, int kk) {
    long long P = 1;
    while (P < (long long)N) P <<= 1;
    if (g_tk_keys_n < (size_t)P) {
        if (g_tk_keys) cudaFree(g_tk_keys);
        g_tk_keys = nullptr;
        g_tk_keys_n = 0;
        if (cudaMalloc(&g_tk_keys, (size_t)P * sizeof(u64)) != cudaSuccess) {
            g_tk_keys = nullptr;
            (void)cudaGetLastError();
            return;
        }
        g_tk_keys_n = (size_t)P;
    }
    long long fb = (P + 255) / 256;
    if (fb > 8192) fb = 8192;
    tk_fill_keys_kernel<<<(unsigned)fb, 256>>>(input, g_tk_keys, (long long)N, P);
    const long long half = P / 2;
    if (half > 0) {
        long long sb = (half + 255) / 256;
        if (sb > 8192) sb = 8192;
        for (long long size = 2; size <= P; size <<= 1)
            for (long long stride = size >> 1; stride > 0; stride >>= 1)
                tk_bitonic_step_kernel<<<(unsigned)sb, 256>>>(g_tk_keys, half, size, stride);
    }
    int sblocks = (kk + 255) / 256;
    if (sblocks > 4096) sblocks = 4096;
    tk_split_kernel<<<sblocks, 256>>>(g_tk_keys, out_v, out_i, kk);
}

// ------------------------------------------------------------------------------------------
// Launch helper for the fast kernel (CS == 1: plain launch; CS > 1: one cluster of CS blocks)
// ------------------------------------------------------------------------------------------
template <int R, int CS>
static cudaError_t tk_launch_fast(const float* input, float* out_v, int* out_i,
                                 int N, int kk, int stop) {
    static bool s_attr_done = false;
    const size_t smem = sizeof(TkSmem);
    if (!s_attr_done) {
        const cudaError_t e = cudaFuncSetAttribute(tk_fast_kernel<R, CS>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)smem);
        if (e != cudaSuccess) return e;
        s_attr_done = true;
    }
    if (CS == 1) {
        tk_fast_kernel<R, CS><<<1, TK_THREADS, smem>>>(input, out_v, out_i, N, kk, stop);
        return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDim = dim3((unsigned)CS, 1, 1);
    cfg.blockDim = dim3(TK_THREADS, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    cudaLaunchAttribute attr[1];
    memset(attr, 0, sizeof(attr));
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)CS;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, tk_fast_kernel<R, CS>, input, out_v, out_i, N, kk, stop);
}

// ------------------------------------------------------------------------------------------
// Entry point
// ------------------------------------------------------------------------------------------
extern "C" void top_k(float* top_k_values, int* top_k_indices, const float* input, int N, int k)
{
    if (N > 0 && k > 0) {
        const int kk = k < N ? k : N;
        bool done = false;
        if (N <= TK_FAST_MAX_N && kk <= TK_FAST_MAX_K) {
            int stop = kk + 64;
            if (stop < 128) stop = 128;
            if (stop > TK_CAND_CAP) stop = TK_CAND_CAP;
            cudaError_t err;
            if (N <= 1024)
                err = tk_launch_fast<1, 1>(input, top_k_values, top_k_indices, N, kk, stop);
            else if (N <= 2048)
                err = tk_launch_fast<2, 1>(input, top_k_values, top_k_indices, N, kk, stop);
            else if (N <= 4096)
                err = tk_launch_fast<4, 1>(input, top_k_values, top_k_indices, N, kk, stop);
            else if (N <= 8192)
                err = tk_launch_fast<8, 1>(input, top_k_values, top_k_indices, N, kk, stop);
            else if (N <= 16384)
                err = tk_launch_fast<16, 1>(input, top_k_values, top_k_indices, N, kk, stop);
            else if (N <= 32768)
                err = tk_launch_fast<8, 4>(input, top_k_values, top_k_indices, N, kk, stop);
            else
                err = tk_launch_fast<TK_N64_R, TK_N64_CS>(input, top_k_values, top_k_indices,
                                                          N, kk, stop);
            if (err == cudaSuccess) done = true;
            else (void)cudaGetLastError();
        }
        if (!done) tk_fallback(input, top_k_values, top_k_indices, N, kk);
    }
    cudaDeviceSynchronize();
}
