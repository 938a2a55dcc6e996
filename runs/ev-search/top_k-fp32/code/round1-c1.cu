// top_k (fp32): k largest of input[N], descending, ties by ascending index.
// One thread-block-cluster launch: register-resident keys, cluster-wide radix select
// (11/11/10-bit digits) with histograms exchanged by DSMEM push (red.add of non-zero
// bins into every CTA's total histogram), early exit into a single-CTA finish.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cub/device/device_radix_sort.cuh>
#include <cstdint>

namespace cg = cooperative_groups;

namespace {

constexpr int NT = 1024;              // threads per CTA
constexpr int DBITS = 11;             // digit width of passes 0 and 1 (pass 2: 10 bits)
constexpr int NB = 1 << DBITS;        // 2048 bins
constexpr int KMAX = 2048;            // candidate buffer capacity (CTA 0)
constexpr int MAXC = 8;               // cluster size used for N > NT*8
constexpr unsigned SLACK = 32;        // early exit when candidates <= k + SLACK
constexpr unsigned FULLMASK = 0xffffffffu;

static_assert(NB == 2 * NT, "each thread owns exactly two bins");

struct __align__(16) U64x2 {
    unsigned long long a, b;
};

// Order-preserving float -> uint map (larger key == larger value); -0 folded onto +0.
__device__ __forceinline__ unsigned f2key(float f) {
    unsigned u = __float_as_uint(f);
    if (u == 0x80000000u) u = 0u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key2f(unsigned k) {
    const unsigned u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    return __uint_as_float(u);
}

__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_sync_all() {
    cluster_arrive();
    cluster_wait();
}

// Inclusive scan over the 1024 threads of the block (contains two __syncthreads).
__device__ __forceinline__ unsigned block_incl_scan_1024(unsigned x, unsigned* wtot) {
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(FULLMASK, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) wtot[wid] = x;
    __syncthreads();
    if (wid == 0) {
        unsigned w = wtot[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(FULLMASK, w, o);
            if (lane >= o) w += y;
        }
        wtot[lane] = w;
    }
    __syncthreads();
    if (wid > 0) x += wtot[wid - 1];
    return x;
}

template <int E>
__global__ void __launch_bounds__(NT, 1)
topk_cluster_kernel(float* __restrict__ out_v, int* __restrict__ out_i,
                    const float* __restrict__ in, const int N, const int k)
{
    __shared__ __align__(16) unsigned s_loc[NB];            // this CTA's histogram
    __shared__ __align__(16) unsigned s_tot[2][NB];         // cluster totals (double-buffered)
    __shared__ __align__(16) unsigned long long s_cand[KMAX];  // candidates (used in CTA 0)
    __shared__ unsigned s_wtot[32];
    __shared__ unsigned s_sel[4];                           // bin, rem, pop, ties-before
    __shared__ unsigned s_count;                            // candidate counter (CTA 0)

    cg::cluster_group cluster = cg::this_cluster();
    const int C = (int)cluster.num_blocks();
    const int crank = (int)cluster.block_rank();
    const int tid = threadIdx.x;
    const int lane = tid & 31;

    // ---- zero shared state, then announce it to the cluster (split barrier) ----
    {
        const uint2 z = make_uint2(0u, 0u);
        reinterpret_cast<uint2*>(s_loc)[tid] = z;
        reinterpret_cast<uint2*>(s_tot[0])[tid] = z;
        reinterpret_cast<uint2*>(s_tot[1])[tid] = z;
        if (tid == 0) s_count = 0u;
    }
    cluster_arrive();   // matched by cluster_wait() in pass 0, before any DSMEM push

    // ---- load this thread's contiguous run of E elements into registers ----
    const long long base = ((long long)crank * NT + tid) * E;
    const long long remn = (long long)N - base;
    const int nv = remn <= 0 ? 0 : (remn >= E ? E : (int)remn);
    unsigned key[E];
    if ((E % 4) == 0 && nv == E && ((reinterpret_cast<uintptr_t>(in) & 15u) == 0)) {
        const float4* p4 = reinterpret_cast<const float4*>(in + base);
#pragma unroll
        for (int j = 0; j < E / 4; ++j) {
            const float4 q4 = __ldg(p4 + j);
            key[4 * j + 0] = f2key(q4.x);
            key[4 * j + 1] = f2key(q4.y);
            key[4 * j + 2] = f2key(q4.z);
            key[4 * j + 3] = f2key(q4.w);
        }
    } else {
#pragma unroll
        for (int j = 0; j < E; ++j) key[j] = (j < nv) ? f2key(__ldg(in + base + j)) : 0u;
    }
    __syncthreads();   // s_loc zeroed before local atomics

    const unsigned K = (unsigned)k;
    const unsigned cap = min(K + SLACK, (unsigned)KMAX);
    unsigned prefix = 0u, rem = K, pop = 0u;
    int lo = 32;
    bool modeA = false;
    const int q = NB / 2 - 1 - tid;   // owned bin pair (2q, 2q+1); descending with tid
    uint2* loc2 = reinterpret_cast<uint2*>(s_loc);

#pragma unroll 1
    for (int p = 0; p < 3; ++p) {
        const int width = (p == 2) ? (32 - 2 * DBITS) : DBITS;   // 11, 11, 10
        const int nlo = lo - width;
        const unsigned dmask = (1u << width) - 1u;
        unsigned* tot = s_tot[p & 1];

        // local histogram of the region (run-merged to cut atomics on ties / sorted data)
        {
            unsigned cur = 0xffffffffu, cc = 0u;
#pragma unroll
            for (int j = 0; j < E; ++j) {
                if (j < nv) {
                    const unsigned kk = key[j];
                    if (p == 0 || (kk >> lo) == prefix) {
                        const unsigned d = (kk >> nlo) & dmask;
                        if (d == cur) {
                            ++cc;
                        } else {
                            if (cc) atomicAdd(&s_loc[cur], cc);
                            cur = d;
                            cc = 1u;
                        }
                    }
                }
            }
            if (cc) atomicAdd(&s_loc[cur], cc);
        }
        __syncthreads();
        if (p == 0) cluster_wait();   // every CTA has zeroed its totals

        // push non-zero local bins into every CTA's total histogram
        {
            const uint2 v = loc2[q];
            if (p < 2) loc2[q] = make_uint2(0u, 0u);   // keep the last pass for tie ranking
            if (v.x | v.y) {
#pragma unroll
                for (int r = 0; r < MAXC; ++r) {
                    if (r < C) {
                        unsigned* dst = cluster.map_shared_rank(tot, r) + 2 * q;
                        if (v.x) atomicAdd(dst, v.x);
                        if (v.y) atomicAdd(dst + 1, v.y);
                    }
                }
            }
        }
        cluster_sync_all();

        // read (and clear for pass p+2) the owned total bins
        const uint2 t2 = reinterpret_cast<uint2*>(tot)[q];
        reinterpret_cast<uint2*>(tot)[q] = make_uint2(0u, 0u);
        const unsigned chi = t2.y;   // bin 2q+1 (higher)
        const unsigned clo = t2.x;   // bin 2q
        const unsigned s = chi + clo;
        const unsigned incl = block_incl_scan_1024(s, s_wtot);
        const unsigned excl = incl - s;
        if (excl < rem && rem <= excl + chi) {
            s_sel[0] = 2u * (unsigned)q + 1u;
            s_sel[1] = rem - excl;
            s_sel[2] = chi;
        } else if (excl + chi < rem && rem <= incl) {
            s_sel[0] = 2u * (unsigned)q;
            s_sel[1] = rem - excl - chi;
            s_sel[2] = clo;
        }
        __syncthreads();
        const unsigned b = s_sel[0];
        rem = s_sel[1];
        pop = s_sel[2];
        prefix = (prefix << width) | b;
        lo = nlo;
        if ((K - rem) + pop <= cap) { modeA = true; break; }
    }

    // ---- mode B (only with lo == 0): exact key threshold, ties taken by index ----
    unsigned tie = 0u;
    if (!modeA) {
        if (tid < 32) {
            unsigned x = 0u;
            if (lane < crank) x = cluster.map_shared_rank(&s_loc[0], lane)[s_sel[0]];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULLMASK, x, o);
            if (lane == 0) s_sel[3] = x;
        }
        unsigned tc = 0u;
#pragma unroll
        for (int j = 0; j < E; ++j) tc += (j < nv && key[j] == prefix) ? 1u : 0u;
        const unsigned incl = block_incl_scan_1024(tc, s_wtot);
        tie = s_sel[3] + incl - tc;
    }

    // ---- gather candidates (mode A) or exact winners (mode B) into CTA 0 ----
    unsigned flags = 0u, cnt = 0u;
#pragma unroll
    for (int j = 0; j < E; ++j) {
        if (j < nv) {
            const unsigned hi = key[j] >> lo;
            bool w = hi > prefix;
            if (hi == prefix) {
                w = modeA || (tie < rem);
                ++tie;
            }
            if (w) {
                flags |= (1u << j);
                ++cnt;
            }
        }
    }
    {
        unsigned x = cnt;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(FULLMASK, x, o);
            if (lane >= o) x += y;
        }
        const unsigned wsum = __shfl_sync(FULLMASK, x, 31);
        unsigned wbase = 0u;
        if (lane == 31 && wsum != 0u) wbase = atomicAdd(cluster.map_shared_rank(&s_count, 0), wsum);
        wbase = __shfl_sync(FULLMASK, wbase, 31);
        if (flags) {
            unsigned long long* dst = cluster.map_shared_rank(&s_cand[0], 0);
            unsigned pos = wbase + x - cnt;
#pragma unroll
            for (int j = 0; j < E; ++j) {
                if (flags & (1u << j)) {
                    const unsigned idx = (unsigned)(base + j);
                    dst[pos++] = ((unsigned long long)key[j] << 32) | (unsigned long long)(~idx);
                }
            }
        }
    }
    cluster_sync_all();   // last DSMEM access of the cluster happens before this
    if (crank != 0) return;

    // ---- CTA 0: rank the candidates by count on the unique 64-bit key, write top k ----
    const unsigned Mg = s_count;
    if (tid == 0 && (Mg & 1u)) s_cand[Mg] = 0ull;   // pad pair (0 never beats anything)
    __syncthreads();

    unsigned S = 1u;
    while (S < 32u && S * 2u * Mg <= (unsigned)NT) S <<= 1;
    const unsigned per = (unsigned)NT / S;
    const unsigned part = (unsigned)tid & (S - 1u);
    const unsigned grp = (unsigned)tid / S;
    const unsigned npairs = (Mg + 1u) >> 1;
    const U64x2* c2 = reinterpret_cast<const U64x2*>(s_cand);
    for (unsigned i0 = 0; i0 < Mg; i0 += per) {
        const unsigned i = i0 + grp;
        unsigned long long mine = 0ull;
        unsigned c = 0u;
        if (i < Mg) {
            mine = s_cand[i];
#pragma unroll 4
            for (unsigned pq = part; pq < npairs; pq += S) {
                const U64x2 v = c2[pq];
                c += (v.a > mine ? 1u : 0u) + (v.b > mine ? 1u : 0u);
            }
        }
        for (unsigned o = 1; o < S; o <<= 1) c += __shfl_xor_sync(FULLMASK, c, o);
        if (i < Mg && part == 0u && c < K) {
            const unsigned kk = (unsigned)(mine >> 32);
            const int idx = (int)(~(unsigned)(mine & 0xffffffffull));
            out_i[c] = idx;
            out_v[c] = (kk == 0x80000000u) ? __ldg(in + idx) : key2f(kk);
        }
    }
}

template <int E>
cudaError_t launch_cluster(float* ov, int* oi, const float* in, int N, int k, int C) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)C, 1, 1);
    cfg.blockDim = dim3(NT, 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = 0;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)C;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, topk_cluster_kernel<E>, ov, oi, in, N, k);
}

// ---------------- general fallback (large N or large k): stable CUB radix sort ----------------
__global__ void fb_prep(const float* __restrict__ in, unsigned* __restrict__ keys,
                        int* __restrict__ idx, int N) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < N) {
        keys[t] = ~f2key(in[t]);   // ascending on ~key == descending on value
        idx[t] = (int)t;
    }
}

__global__ void fb_store(const int* __restrict__ idx, const float* __restrict__ in,
                         float* __restrict__ ov, int* __restrict__ oi, int k) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < k) {
        const int i = idx[t];
        oi[t] = i;
        ov[t] = in[i];
    }
}

void topk_fallback(float* ov, int* oi, const float* in, int N, int k) {
    unsigned* kin = nullptr;
    unsigned* kout = nullptr;
    int* iin = nullptr;
    int* iout = nullptr;
    void* tmp = nullptr;
    size_t tb = 0;
    cudaMalloc(&kin, (size_t)N * sizeof(unsigned));
    cudaMalloc(&kout, (size_t)N * sizeof(unsigned));
    cudaMalloc(&iin, (size_t)N * sizeof(int));
    cudaMalloc(&iout, (size_t)N * sizeof(int));
    fb_prep<<<(unsigned)(((long long)N + 255) / 256), 256>>>(in, kin, iin, N);
    cub::DeviceRadixSort::SortPairs(nullptr, tb, kin, kout, iin, iout, N);
    cudaMalloc(&tmp, tb > 0 ? tb : 1);
    cub::DeviceRadixSort::SortPairs(tmp, tb, kin, kout, iin, iout, N);   // stable
    fb_store<<<(unsigned)(((long long)k + 255) / 256), 256>>>(iout, in, ov, oi, k);
    cudaDeviceSynchronize();
    cudaFree(tmp);
    cudaFree(iout);
    cudaFree(iin);
    cudaFree(kout);
    cudaFree(kin);
}

}  // namespace

extern "C" void top_k(float* top_k_values, int* top_k_indices, const float* input, int N, int k) {
    if (N > 0 && k > 0) {
        const int kk = k < N ? k : N;
        bool done = false;
        if (kk <= KMAX && N <= MAXC * NT * 8) {
            int C, E;
            if (N <= NT * 8) {
                C = 1;
                E = (N <= NT) ? 1 : (N <= 2 * NT) ? 2 : (N <= 4 * NT) ? 4 : 8;
            } else {
                C = MAXC;
                const int per = (N + C * NT - 1) / (C * NT);
                E = (per <= 2) ? 2 : (per <= 4) ? 4 : 8;
            }
            cudaError_t err;
            switch (E) {
                case 1: err = launch_cluster<1>(top_k_values, top_k_indices, input, N, kk, C); break;
                case 2: err = launch_cluster<2>(top_k_values, top_k_indices, input, N, kk, C); break;
                case 4: err = launch_cluster<4>(top_k_values, top_k_indices, input, N, kk, C); break;
                default: err = launch_cluster<8>(top_k_values, top_k_indices, input, N, kk, C); break;
            }
            if (err == cudaSuccess) done = true;
            else (void)cudaGetLastError();
        }
        if (!done) topk_fallback(top_k_values, top_k_indices, input, N, kk);
    }
    cudaDeviceSynchronize();
}
