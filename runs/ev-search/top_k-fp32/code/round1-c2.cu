// Two-level top-k in a single launch.
//  Phase 1 (every block): its chunk goes into smem as unique 64-bit keys, (ordered float key << 32) | ~index.
//          A block radix select (8-bit digits, warp-aggregated smem histograms, early exit) finds the
//          threshold T with exactly kl = min(k, chunk) keys >= T. Those keys are written (unordered)
//          into a static device scratch slot.
//  Phase 2 (the block that draws the last ticket): it loads all candidates, runs the same radix select
//          for k, then rank-sorts the k survivors and writes the outputs.
//  Ties: the low 32 bits are ~index, so equal values order by ascending index, and every key is unique.
//  -0.0 is folded to +0.0 in the key, so it ties with +0.0 as in the baseline's '>' comparison.
//  Fallback (k > 256 or N too large for the static scratch): a stable CUB radix sort.
#include <cuda_runtime.h>
#include <cub/cub.cuh>
#include <stdint.h>

#define TK_BLOCK 512
#define TK_CHUNK_MAX 4096   // phase-1 items per block (smem capacity)
#define TK_CAND_MAX 4096    // phase-2 candidates (smem capacity)
#define TK_KMAX 256         // largest k on the fast path

typedef unsigned long long u64;

__device__ unsigned int g_topk_ticket = 0;
__device__ u64 g_topk_cand[TK_CAND_MAX];

__device__ __forceinline__ unsigned f2key(float f) {
    unsigned u = __float_as_uint(f);
    if ((u << 1) == 0u) u = 0u;  // -0 -> +0
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key2f(unsigned k) {
    unsigned u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    return __uint_as_float(u);
}

// Returns T such that exactly kk of items[0..n) are >= T (items are unique). Needs 1 <= kk.
template <int BLOCK>
__device__ u64 block_radix_select(const u64* items, int n, int kk) {
    __shared__ unsigned s_hist[256];
    __shared__ unsigned s_wsum[8];
    __shared__ u64 s_prefix;
    __shared__ unsigned s_rem;
    __shared__ int s_done;

    if (kk >= n) return 0ull;  // uniform: everything is selected

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    u64 prefix = 0ull, mask = 0ull;
    unsigned rem = (unsigned)kk;

    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = tid; b < 256; b += BLOCK) s_hist[b] = 0u;
        __syncthreads();
        for (int base = 0; base < n; base += BLOCK) {
            const int i = base + tid;
            int bin = 256;  // "no bin"
            if (i < n) {
                const u64 v = items[i];
                if ((v & mask) == prefix) bin = (int)((v >> shift) & 255ull);
            }
            const unsigned peers = __match_any_sync(0xffffffffu, bin);
            if (bin < 256 && lane == (__ffs(peers) - 1)) atomicAdd(&s_hist[bin], (unsigned)__popc(peers));
        }
        __syncthreads();
        unsigned c = 0u, incl = 0u;
        int b = 0;
        if (tid < 256) {
            b = 255 - tid;  // thread order = descending bin order
            c = s_hist[b];
            incl = c;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const unsigned t = __shfl_up_sync(0xffffffffu, incl, off);
                if (lane >= off) incl += t;
            }
            if (lane == 31) s_wsum[tid >> 5] = incl;
        }
        __syncthreads();
        if (tid < 256) {
            unsigned add = 0u;
            const int w = tid >> 5;
            for (int q = 0; q < w; ++q) add += s_wsum[q];
            incl += add;
            const unsigned above = incl - c;
            if (above < rem && rem <= incl) {
                const unsigned nrem = rem - above;
                s_prefix = prefix | ((u64)(unsigned)b << shift);
                s_rem = nrem;
                s_done = (c == nrem) ? 1 : 0;
            }
        }
        __syncthreads();
        prefix = s_prefix;
        rem = s_rem;
        const int done = s_done;
        mask |= (0xffull << shift);
        if (done) break;  // uniform
    }
    return prefix;
}

// Writes all items >= T (unordered) to out[0..). Ends with a barrier.
template <int BLOCK>
__device__ void block_compact_ge(const u64* items, int n, u64 T, u64* out) {
    __shared__ unsigned s_cnt;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    if (tid == 0) s_cnt = 0u;
    __syncthreads();
    for (int base = 0; base < n; base += BLOCK) {
        const int i = base + tid;
        u64 v = 0ull;
        bool f = false;
        if (i < n) {
            v = items[i];
            f = (v >= T);
        }
        const unsigned bal = __ballot_sync(0xffffffffu, f);
        unsigned wbase = 0u;
        if (lane == 0 && bal) wbase = atomicAdd(&s_cnt, (unsigned)__popc(bal));
        wbase = __shfl_sync(0xffffffffu, wbase, 0);
        if (f) out[wbase + __popc(bal & ((1u << lane) - 1u))] = v;
    }
    __syncthreads();
}

// Rank-sorts cnt (<= TK_KMAX) unique keys in smem and writes the outputs.
template <int BLOCK>
__device__ void block_final_sort(const u64* sel, int cnt, float* values, int* indices) {
    __shared__ unsigned s_rank[TK_KMAX];
    const int tid = threadIdx.x;
    for (int i = tid; i < cnt; i += BLOCK) s_rank[i] = 0u;
    __syncthreads();
    int parts = BLOCK / cnt;
    if (parts < 1) parts = 1;
    const int total = parts * cnt;
    for (int t = tid; t < total; t += BLOCK) {
        const int i = t % cnt;
        const int p = t / cnt;
        const int jb = (p * cnt) / parts;
        const int je = ((p + 1) * cnt) / parts;
        const u64 v = sel[i];
        unsigned r = 0u;
        for (int j = jb; j < je; ++j) r += (sel[j] > v) ? 1u : 0u;
        if (r) atomicAdd(&s_rank[i], r);
    }
    __syncthreads();
    for (int i = tid; i < cnt; i += BLOCK) {
        const u64 v = sel[i];
        const unsigned r = s_rank[i];
        values[r] = key2f((unsigned)(v >> 32));
        indices[r] = (int)(~(unsigned)(v & 0xffffffffull));
    }
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
topk_kernel(const float* __restrict__ input, float* __restrict__ values, int* __restrict__ indices,
            int N, int kk, int chunk, int klFull, int M) {
    __shared__ u64 s_items[(TK_CHUNK_MAX > TK_CAND_MAX) ? TK_CHUNK_MAX : TK_CAND_MAX];
    __shared__ u64 s_sel[TK_KMAX];
    __shared__ unsigned s_last;

    const int tid = threadIdx.x;
    const int G = gridDim.x;
    const int base = blockIdx.x * chunk;
    int n = N - base;
    if (n > chunk) n = chunk;

    // ---- phase 1: load the chunk (many independent loads in flight) ----
    {
        constexpr int R = TK_CHUNK_MAX / BLOCK;
        float f[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int j = r * BLOCK + tid;
            f[r] = 0.0f;
            if (j < n) f[r] = __ldg(input + base + j);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int j = r * BLOCK + tid;
            if (j < n)
                s_items[j] = ((u64)f2key(f[r]) << 32) | (u64)(~(unsigned)(base + j));
        }
    }
    __syncthreads();

    const int kl = kk < n ? kk : n;
    u64 T = block_radix_select<BLOCK>(s_items, n, kl);

    if (G == 1) {
        block_compact_ge<BLOCK>(s_items, n, T, s_sel);
        block_final_sort<BLOCK>(s_sel, kk, values, indices);
        return;
    }

    block_compact_ge<BLOCK>(s_items, n, T, g_topk_cand + (size_t)blockIdx.x * klFull);
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const unsigned t = atomicInc(&g_topk_ticket, (unsigned)(G - 1));  // wraps to 0 on the last block
        s_last = (t == (unsigned)(G - 1)) ? 1u : 0u;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();

    // ---- phase 2: the last block selects the global top-k among the M candidates ----
    {
        constexpr int R = TK_CAND_MAX / BLOCK;
        u64 v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int i = r * BLOCK + tid;
            v[r] = 0ull;
            if (i < M) v[r] = __ldcg(g_topk_cand + i);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int i = r * BLOCK + tid;
            if (i < M) s_items[i] = v[r];
        }
    }
    __syncthreads();
    T = block_radix_select<BLOCK>(s_items, M, kk);
    block_compact_ge<BLOCK>(s_items, M, T, s_sel);
    block_final_sort<BLOCK>(s_sel, kk, values, indices);
}

// ---------------- fallback: stable CUB radix sort ----------------
__global__ void topk_fb_prep(const float* __restrict__ input, unsigned* keys, int* vals, int N) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < N) {
        keys[t] = ~f2key(input[t]);  // ascending ~key == descending key
        vals[t] = t;
    }
}

__global__ void topk_fb_store(const unsigned* keys, const int* vals, float* values, int* indices, int kk) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < kk) {
        values[t] = key2f(~keys[t]);
        indices[t] = vals[t];
    }
}

static void topk_fallback(float* values, int* indices, const float* input, int N, int kk) {
    unsigned *kin = nullptr, *kout = nullptr;
    int *vin = nullptr, *vout = nullptr;
    void* tmp = nullptr;
    size_t bytes = 0;
    cudaMalloc(&kin, (size_t)N * sizeof(unsigned));
    cudaMalloc(&kout, (size_t)N * sizeof(unsigned));
    cudaMalloc(&vin, (size_t)N * sizeof(int));
    cudaMalloc(&vout, (size_t)N * sizeof(int));
    topk_fb_prep<<<(N + 255) / 256, 256>>>(input, kin, vin, N);
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, kin, kout, vin, vout, N);
    if (bytes == 0) bytes = 1;
    cudaMalloc(&tmp, bytes);
    cub::DeviceRadixSort::SortPairs(tmp, bytes, kin, kout, vin, vout, N);
    topk_fb_store<<<(kk + 255) / 256, 256>>>(kout, vout, values, indices, kk);
    cudaDeviceSynchronize();
    cudaFree(tmp);
    cudaFree(kin);
    cudaFree(kout);
    cudaFree(vin);
    cudaFree(vout);
}

extern "C" void top_k(float* top_k_values, int* top_k_indices, const float* input, const int N,
                      const int k) {
    if (N > 0 && k > 0) {
        const int kk = k < N ? k : N;
        bool launched = false;
        if (kk <= TK_KMAX) {
            int G, chunk;
            if (N <= 2048) {
                G = 1;
                chunk = N;
            } else {
                const int gmax = TK_CAND_MAX / kk;
                const int minchunk = (8 * kk > 512) ? 8 * kk : 512;
                const int gt = (N + minchunk - 1) / minchunk;
                G = gmax < gt ? gmax : gt;
                if (G < 1) G = 1;
                chunk = (N + G - 1) / G;
                G = (N + chunk - 1) / chunk;
            }
            if (chunk <= TK_CHUNK_MAX) {
                const int klFull = kk < chunk ? kk : chunk;
                const int nLast = N - (G - 1) * chunk;
                const int M = (G - 1) * klFull + (kk < nLast ? kk : nLast);
                topk_kernel<TK_BLOCK><<<G, TK_BLOCK>>>(input, top_k_values, top_k_indices, N, kk, chunk,
                                                       klFull, M);
                launched = true;
            }
        }
        if (!launched) topk_fallback(top_k_values, top_k_indices, input, N, kk);
    }
    cudaDeviceSynchronize();
}
