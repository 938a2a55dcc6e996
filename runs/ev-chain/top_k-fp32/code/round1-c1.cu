// top_k (fp32): the k largest of input[N] in descending order with their int32 positions;
// equal values ordered by ascending index.
//
// Fast path (N <= 65536, k <= 1024): a single launch of one thread-block cluster
// (<= 8 blocks x 1024 threads). Every element becomes a unique 64-bit key
//   key = (order-preserving bits of value, with -0.0 canonicalised to +0.0) << 32 | ~index
// so "descending key" == "descending value, ties by ascending index".
// A cluster-wide MSB radix select (8-bit first digit with a conflict-free lane-private
// histogram, then 10-bit digits, histograms combined through DSMEM) narrows the candidates
// to the set of keys >= some prefix, containing at most ~k+64 keys. The candidates are
// gathered into block 0's shared memory, ranked exactly, and written to the outputs.
// Fallback (larger shapes or a failed launch): CUB device radix sort of the same keys.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cub/cub.cuh>
#include <stdint.h>
#include <string.h>

namespace cg = cooperative_groups;

typedef unsigned long long u64;

#define TK_THREADS 1024
#define TK_CAND_CAP 2048
#define TK_FAST_MAX_N 65536
#define TK_FAST_MAX_K 1024
#define TK_FULL 0xffffffffu

// ------------------------------------------------------------------------------------------
// Key helpers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ u64 tk_make_key(float v, unsigned idx) {
    unsigned u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;  // -0.0 == +0.0: tie broken by index
    const unsigned m = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((u64)m << 32) | (u64)(~idx);
}

__device__ __forceinline__ float tk_key_value(u64 key) {
    const unsigned m = (unsigned)(key >> 32);
    const unsigned u = (m & 0x80000000u) ? (m & 0x7FFFFFFFu) : ~m;
    return __uint_as_float(u);
}

__device__ __forceinline__ int tk_key_index(u64 key) {
    return (int)(~(unsigned)(key & 0xFFFFFFFFull));
}

// ------------------------------------------------------------------------------------------
// Shared memory layout of the fast kernel (static, < 48 KB)
// ------------------------------------------------------------------------------------------
struct __align__(16) TkSmem {
    union {
        unsigned lp[256 * 32];     // pass-0 histogram, one counter per (bin, lane): 32 KB
        u64 cand[TK_CAND_CAP];     // gathered candidates (used in block 0 only): 16 KB
    } u;
    unsigned hist[2][1024];        // per-pass block histograms (double-buffered), 8 KB
    unsigned wtot[32];
    unsigned res_digit;
    unsigned res_gt;
    unsigned res_eq;
    unsigned res_base;
    unsigned cand_count;
};

__device__ __forceinline__ void tk_sync(cg::cluster_group& cluster, int cs) {
    if (cs > 1) cluster.sync();
    else __syncthreads();
}

// ------------------------------------------------------------------------------------------
// Fast kernel: one cluster, blocks of 1024 threads, R keys per thread.
// ------------------------------------------------------------------------------------------
template <int R>
__global__ void __launch_bounds__(TK_THREADS, 1)
tk_fast_kernel(const float* __restrict__ input, float* __restrict__ out_v,
               int* __restrict__ out_i, int N, int kk, int stop)
{
    __shared__ TkSmem sm;
    cg::cluster_group cluster = cg::this_cluster();
    const int cs = (int)cluster.num_blocks();
    const int crank = (int)cluster.block_rank();
    const int t = (int)threadIdx.x;
    const int lane = t & 31;
    const int warp = t >> 5;

    // ---- zero shared state ----------------------------------------------------------------
    {
        uint4* lp4 = reinterpret_cast<uint4*>(sm.u.lp);
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        lp4[t] = z;
        lp4[t + TK_THREADS] = z;
        sm.hist[0][t] = 0u;
        sm.hist[1][t] = 0u;
        if (t == 0) sm.cand_count = 0u;
    }

    // ---- load the chunk into registers as keys -------------------------------------------
    u64 key[R];
    unsigned vmask = 0u;
    const int cbase = crank * (TK_THREADS * R);
    bool loaded = false;
    if constexpr (R >= 4) {
        const bool vec = ((reinterpret_cast<uintptr_t>(input) & (uintptr_t)15) == 0);
        if (vec) {
            loaded = true;
#pragma unroll
            for (int q = 0; q < R / 4; ++q) {
                const int g = cbase + q * (TK_THREADS * 4) + t * 4;
                if (g + 3 < N) {
                    const float4 v = __ldg(reinterpret_cast<const float4*>(input + g));
                    key[4 * q + 0] = tk_make_key(v.x, (unsigned)(g + 0));
                    key[4 * q + 1] = tk_make_key(v.y, (unsigned)(g + 1));
                    key[4 * q + 2] = tk_make_key(v.z, (unsigned)(g + 2));
                    key[4 * q + 3] = tk_make_key(v.w, (unsigned)(g + 3));
                    vmask |= 0xFu << (4 * q);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int ge = g + e;
                        if (ge < N) {
                            key[4 * q + e] = tk_make_key(__ldg(input + ge), (unsigned)ge);
                            vmask |= 1u << (4 * q + e);
                        } else {
                            key[4 * q + e] = 0ull;
                        }
                    }
                }
            }
        }
    }
    if (!loaded) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int g = cbase + r * TK_THREADS + t;
            if (g < N) {
                key[r] = tk_make_key(__ldg(input + g), (unsigned)g);
                vmask |= 1u << r;
            } else {
                key[r] = 0ull;
            }
        }
    }
    __syncthreads();

    // ---- cluster-wide MSB radix select -----------------------------------------------------
    // Invariant: gt = #keys with (key >> shift) > pref, M = #keys with (key >> shift) >= pref,
    //            gt < kk <= M. (shift == 64 means "no prefix yet": all keys are candidates.)
    int shift = 64;
    u64 pref = 0ull;
    unsigned gt = 0u;
    unsigned M = (unsigned)N;
    int pass = 0;
    while (M > (unsigned)stop && shift > 0) {
        const int width = (shift == 64) ? 8 : (shift < 10 ? shift : 10);
        const int nshift = shift - width;
        unsigned* H = sm.hist[pass & 1];

        if (pass == 0) {
            // Lane-private histogram: counter (bin, lane) at bin*32 + lane -> bank == lane,
            // so no intra-instruction conflicts whatever the data distribution.
#pragma unroll
            for (int r = 0; r < R; ++r)
                if ((vmask >> r) & 1u)
                    atomicAdd(&sm.u.lp[(((unsigned)(key[r] >> 56)) << 5) + (unsigned)lane], 1u);
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
#pragma unroll
            for (int r = 0; r < R; ++r)
                if (((vmask >> r) & 1u) && ((key[r] >> shift) == pref))
                    atomicAdd(&H[(unsigned)(key[r] >> nshift) & dmask], 1u);
        }

        tk_sync(cluster, cs);

        // The other buffer held the previous pass's histogram; every remote read of it
        // happened before the sync above, so it can be cleared for the next pass now.
        if (pass > 0) sm.hist[(pass + 1) & 1][t] = 0u;

        const int nb = 1 << width;
        unsigned c = 0u;
        if (t < nb) {
            if (cs == 1) {
                c = H[t];
            } else {
#pragma unroll
                for (int r = 0; r < 8; ++r)
                    if (r < cs) c += cluster.map_shared_rank(H, (unsigned)r)[t];
            }
        }

        // Block-wide suffix sum over bins (bin == thread index).
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
        const unsigned suf = x + above;                 // #candidates in bins >= t
        const unsigned needed = (unsigned)kk - gt;      // >= 1
        if (c > 0u && suf >= needed && suf - c < needed) {
            sm.res_digit = (unsigned)t;
            sm.res_gt = suf - c;
            sm.res_eq = c;
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
    // (only matters if no pass ran, which cannot happen for cs > 1 in practice).
    if (pass == 0 && cs > 1) cluster.sync();

    // ---- gather candidates (keys >= prefix) into block 0's shared memory -----------------
    unsigned cnt = 0u;
    unsigned selm = 0u;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        bool s = ((vmask >> r) & 1u) != 0u;
        if (s && shift < 64) s = ((key[r] >> shift) >= pref);
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
        unsigned* cc = (cs > 1) ? cluster.map_shared_rank(&sm.cand_count, 0u) : &sm.cand_count;
        sm.res_base = atomicAdd(cc, btot);
    }
    __syncthreads();
    if (btot > 0u && cnt > 0u) {
        u64* cd = (cs > 1) ? cluster.map_shared_rank(&sm.u.cand[0], 0u) : &sm.u.cand[0];
        unsigned pos = sm.res_base + wexcl + inc - cnt;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if ((selm >> r) & 1u) {
                if (pos < (unsigned)TK_CAND_CAP) cd[pos] = key[r];
                ++pos;
            }
        }
    }
    tk_sync(cluster, cs);
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
// Fallback: CUB device radix sort of the keys (any N, any k)
// ------------------------------------------------------------------------------------------
__global__ void tk_make_keys_kernel(const float* __restrict__ input, u64* __restrict__ keys, int N) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        keys[i] = tk_make_key(input[i], (unsigned)i);
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
static void* g_tk_temp = nullptr;
static size_t g_tk_temp_bytes = 0;

static void tk_fallback(const float* input, float* out_v, int* out_i, int N, int kk) {
    const size_t need = 2 * (size_t)N;
    if (g_tk_keys_n < need) {
        if (g_tk_keys) cudaFree(g_tk_keys);
        g_tk_keys = nullptr;
        g_tk_keys_n = 0;
        if (cudaMalloc(&g_tk_keys, need * sizeof(u64)) != cudaSuccess) { g_tk_keys = nullptr; return; }
        g_tk_keys_n = need;
    }
    u64* kin = g_tk_keys;
    u64* kout = g_tk_keys + N;
    int blocks = (N + 255) / 256;
    if (blocks > 8192) blocks = 8192;
    tk_make_keys_kernel<<<blocks, 256>>>(input, kin, N);
    size_t tb = 0;
    cub::DeviceRadixSort::SortKeysDescending(nullptr, tb, kin, kout, N);
    if (tb == 0) tb = 1;
    if (g_tk_temp_bytes < tb) {
        if (g_tk_temp) cudaFree(g_tk_temp);
        g_tk_temp = nullptr;
        g_tk_temp_bytes = 0;
        if (cudaMalloc(&g_tk_temp, tb) != cudaSuccess) { g_tk_temp = nullptr; return; }
        g_tk_temp_bytes = tb;
    }
    size_t tb2 = g_tk_temp_bytes;
    cub::DeviceRadixSort::SortKeysDescending(g_tk_temp, tb2, kin, kout, N);
    int sblocks = (kk + 255) / 256;
    if (sblocks > 4096) sblocks = 4096;
    tk_split_kernel<<<sblocks, 256>>>(kout, out_v, out_i, kk);
}

// ------------------------------------------------------------------------------------------
// Launch helper for the fast kernel (cluster of cs blocks; cs == grid size)
// ------------------------------------------------------------------------------------------
template <int R>
static cudaError_t tk_launch_fast(const float* input, float* out_v, int* out_i,
                                 int N, int kk, int stop, int cs) {
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDim = dim3((unsigned)cs, 1, 1);
    cfg.blockDim = dim3(TK_THREADS, 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = 0;
    cudaLaunchAttribute attr[1];
    memset(attr, 0, sizeof(attr));
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cs;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, tk_fast_kernel<R>, input, out_v, out_i, N, kk, stop);
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
                err = tk_launch_fast<1>(input, top_k_values, top_k_indices, N, kk, stop, 1);
            else if (N <= 2048)
                err = tk_launch_fast<2>(input, top_k_values, top_k_indices, N, kk, stop, 1);
            else if (N <= 32768)
                err = tk_launch_fast<4>(input, top_k_values, top_k_indices, N, kk, stop,
                                        (N + 4095) / 4096);
            else
                err = tk_launch_fast<8>(input, top_k_values, top_k_indices, N, kk, stop,
                                        (N + 8191) / 8192);
            if (err == cudaSuccess) done = true;
            else (void)cudaGetLastError();
        }
        if (!done) tk_fallback(input, top_k_values, top_k_indices, N, kk);
    }
    cudaDeviceSynchronize();
}
