// top_k (fp32): the k largest of input[N] in descending order with their int32 positions;
// equal values by ascending index.
//
// Every element has a 48-bit composite  (key32 << 16) | (0xFFFF - index)  (key32 is the
// order-preserving transform of the float, with -0.0 canonicalised to +0.0). A larger composite
// means a larger value, or an equal value with a smaller index. All composites are distinct.
//
// Cluster path (16384 <= N <= 65536, k <= 256): ONE launch of a CS-CTA thread-block cluster
// (default 16 CTAs x 1024 threads x 4 keys per thread in registers; fallback 8 x 1024 x 8).
//   * Element e goes to global thread e mod (CS*NTH).
//   * 32 samples per CTA: the max composite of each group of NTH/32 threads (a warp when
//     NTH == 1024). Warp 0 of each CTA ranks its 32 samples (a sorted run) and writes the run
//     into the smem of every CTA of the cluster. Cluster barrier #1.
//   * Each CTA computes the exact global rank (among all CS*32 samples) of its OWN 32 samples.
//     Its filter threshold is its own highest sample with rank >= k-1 (<= the true k-th).
//   * Candidates are appended to the leader CTA's smem with warp-aggregated DSMEM atomics.
//     Cluster barrier #2. The leader ranks the candidates by counting and writes the outputs.
//   * Overflow (adversarial, tie-heavy or sorted inputs): 48-bit bisection for the exact k-th
//     composite over the buffer (or over global memory when the buffer overflowed).
// Round 3: the leader (and the single-CTA kernel) warms the output lines / translations at
// kernel start (prefetch.global.L2 by default, TOPK_WARM=2: dummy store, 0: off), so the final
// stores do not take cold misses at the tail. The cluster shape is a template; the launch
// configuration is cached per shape and the success path does no extra runtime calls.
// Single-CTA path (round1-c3): other N <= 65536 with k <= 1024.
// Generic fallback (other sizes): CUB stable radix sort of (~key, index) pairs.

#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cub/cub.cuh>
#include <stdint.h>

// ---- compile-time knobs (defaults = the measured round-2 configuration + output warming) ----
#ifndef TOPK_WARM
#define TOPK_WARM 1          // 0: off, 1: prefetch.global.L2, 2: dummy store
#endif
#ifndef TOPK_A_CS            // main cluster shape, 16384 <= N <= 65536
#define TOPK_A_CS 16
#endif
#ifndef TOPK_A_NT
#define TOPK_A_NT 1024
#endif
#ifndef TOPK_A_EPT
#define TOPK_A_EPT 4
#endif
#ifndef TOPK_B_NMAX          // optional second shape for 16384 <= N <= TOPK_B_NMAX (0: off)
#define TOPK_B_NMAX 0
#endif
#ifndef TOPK_B_CS
#define TOPK_B_CS 8
#endif
#ifndef TOPK_B_NT
#define TOPK_B_NT 1024
#endif
#ifndef TOPK_B_EPT
#define TOPK_B_EPT 4
#endif

namespace cg = cooperative_groups;

namespace {

typedef unsigned long long u64;

constexpr int NT = 1024;                       // threads of the single CTA
constexpr int RS = 16;                         // keys per thread held in registers
constexpr int SCAP = 49152;                    // keys held in shared memory
constexpr int SQ = SCAP / 4 / NT;              // uint4 groups of the smem stash per thread (12)
constexpr int SE = SCAP / NT;                  // scalar smem stash elements per thread (48)
constexpr int CAP_FAST = SCAP + NT * RS;       // 65536: largest N held on chip
constexpr int CCAP = 5632;                     // candidate buffer capacity
constexpr int BJ = (CCAP + NT - 1) / NT;       // candidate buffer entries per thread (6)
constexpr int KMAX = NT;                       // largest k on the fast path
constexpr int BREG = CCAP * 6;                 // candidate buffer bytes (u32 key + u16 index)
constexpr int SMEM_DYN = SCAP * 4 + BREG;      // 230400 bytes of dynamic shared memory

static_assert(SQ * 4 * NT == SCAP, "stash layout");
static_assert(SE * NT == SCAP, "stash layout");
static_assert(BREG >= 16384 + KMAX * 12, "final list must fit in the buffer region");
static_assert(SCAP * 4 >= 16384 + KMAX * 12, "final list must fit in the stash region");
static_assert(CAP_FAST <= 65536, "16-bit index in the composite");

// cluster path
constexpr int CL_CAP = 4096;     // leader candidate buffer (composites)
constexpr int CL_KMAX = 256;     // largest k on the cluster path
constexpr int CL_NMIN = 16384;   // smallest N on the cluster path
constexpr int CL_NMAX = 65536;   // largest N on the cluster path (16-bit index)
constexpr int RSTR = 33;         // padded stride (u64) of a sorted run of 32 samples

// largest k a cluster of cs CTAs serves (cs*32 samples)
constexpr int cl_kmax(int cs) { return cs * 16 < CL_KMAX ? cs * 16 : CL_KMAX; }

static_assert(TOPK_A_CS * TOPK_A_NT * TOPK_A_EPT == CL_NMAX, "main shape must hold 65536");
static_assert(TOPK_B_NMAX == 0 || TOPK_B_CS * TOPK_B_NT * TOPK_B_EPT >= TOPK_B_NMAX,
              "small shape must hold its band");

#ifdef TOPK_TIMELINE
__device__ unsigned long long g_topk_tl[16 * 8];
__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define TL_MARK(cr, p)                                                     \
    do {                                                                   \
        if (threadIdx.x == 0) g_topk_tl[(cr) * 8 + (p)] = gtimer();        \
    } while (0)
#else
#define TL_MARK(cr, p) \
    do {               \
    } while (0)
#endif

// ---------------------------------------------------------------------------------------------
// small helpers
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned f2k(unsigned u) {
    // positive: u | 0x80000000 ; negative: -u (two's complement). -0.0 -> 0x80000000 == +0.0.
    const unsigned m = (unsigned)((int)u >> 31);
    return (u ^ (m | 0x80000000u)) - m;
}

__device__ __forceinline__ float k2f(unsigned key) {
    const unsigned u = (key & 0x80000000u) ? (key & 0x7fffffffu) : (0u - key);
    return __uint_as_float(u);
}

__device__ __forceinline__ u64 mkc(unsigned key, int e) {
    return ((u64)key << 16) | (u64)(0xFFFFu - (unsigned)e);
}

// Touch one line of an output array (address inside the array, 4-byte aligned).
__device__ __forceinline__ void touch_line(uintptr_t p) {
#if TOPK_WARM == 2
    asm volatile("st.global.u32 [%0], %1;\n" ::"l"(p), "r"(0u) : "memory");
#elif TOPK_WARM == 1
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
#else
    (void)p;
#endif
}

// Touch every 128-B line of [p, p + bytes) (bytes > 0); worker t of nt.
// Each touched address lies inside the range.
__device__ __forceinline__ void warm_range(const void* p, int bytes, int t, int nt) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const uintptr_t first = a & ~(uintptr_t)127;
    const uintptr_t last = (a + (uintptr_t)bytes - 1) & ~(uintptr_t)127;
    for (uintptr_t l = first + (uintptr_t)t * 128u; l <= last; l += (uintptr_t)nt * 128u)
        touch_line(l < a ? a : l);
}

__device__ __forceinline__ int lsh(int L) {   // shift of the prefix ending at level L
    return L == 0 ? 36 : (L == 1 ? 24 : (L == 2 ? 16 : (L == 3 ? 4 : 0)));
}
__device__ __forceinline__ int lw(int L) {    // digit width of level L
    return L == 0 ? 12 : (L == 1 ? 12 : (L == 2 ? 8 : (L == 3 ? 12 : 4)));
}

// register-stash slot i of thread tid holds element ridx(i, tid)
__device__ __forceinline__ int ridx(int i, int tid) {
    return SCAP + 4 * ((i >> 2) * NT + tid) + (i & 3);
}

__device__ __forceinline__ void cp_async16(void* sdst, const void* gsrc) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(sdst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gsrc) : "memory");
}
__device__ __forceinline__ void cp_async4(void* sdst, const void* gsrc) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(sdst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gsrc) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int n>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}
__device__ __forceinline__ void cp_async_wait_stage(int g) {
    if (g == 0) cp_async_wait<3>();
    else if (g == 1) cp_async_wait<2>();
    else if (g == 2) cp_async_wait<1>();
    else cp_async_wait<0>();
}

// Exclusive block scan over threads 0..NT-1 (contains two __syncthreads; all threads call it).
__device__ __forceinline__ unsigned block_excl_scan(unsigned v, unsigned* wsum) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    unsigned x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) wsum[w] = x;
    __syncthreads();
    if (w == 0) {
        unsigned s = wsum[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        wsum[lane] = s;
    }
    __syncthreads();
    return (w ? wsum[w - 1] : 0u) + x - v;
}

// Find the bin d (scanning from the top) with above < need <= above + hist[d].
// res[0] = d, res[1] = above (count in bins > d), res[2] = hist[d]. Ends with __syncthreads.
__device__ __forceinline__ void select_bin(const unsigned* hist, unsigned need, unsigned* wsum,
                                           unsigned* res) {
    const int tid = threadIdx.x;
    const uint4 v = reinterpret_cast<const uint4*>(hist)[NT - 1 - tid];  // bins 4092-4t..4095-4t
    const unsigned tot = v.x + v.y + v.z + v.w;
    unsigned a = block_excl_scan(tot, wsum);
    const unsigned b = 4u * (unsigned)(NT - 1 - tid);
    if (a < need && a + v.w >= need) { res[0] = b + 3; res[1] = a; res[2] = v.w; }
    a += v.w;
    if (a < need && a + v.z >= need) { res[0] = b + 2; res[1] = a; res[2] = v.z; }
    a += v.z;
    if (a < need && a + v.y >= need) { res[0] = b + 1; res[1] = a; res[2] = v.y; }
    a += v.y;
    if (a < need && a + v.x >= need) { res[0] = b; res[1] = a; res[2] = v.x; }
    __syncthreads();
}

template <bool KEYONLY>
__device__ __forceinline__ bool ge_thr(unsigned key, int e, unsigned T32, u64 T64) {
    if (KEYONLY) return key >= T32;
    return mkc(key, e) >= T64;
}

// Compact every on-chip stash element with composite >= T64 through wr(pos, key, index).
// Count + block scan + write: deterministic, no contended atomics. All threads call it.
template <bool KEYONLY, class W>
__device__ __forceinline__ void compact_stash(const unsigned* skeys, const unsigned (&rk)[RS],
                                              int N, int nS, unsigned T32, u64 T64,
                                              unsigned* wsum, W wr) {
    const int tid = threadIdx.x;
    u64 m = 0;
#pragma unroll
    for (int j = 0; j < SQ; ++j) {
        const int q = tid + j * NT;
        const int e0 = 4 * q;
        if (e0 < nS) {
            const uint4 v = reinterpret_cast<const uint4*>(skeys)[q];
            const bool full = e0 + 4 <= nS;
            if (ge_thr<KEYONLY>(v.x, e0 + 0, T32, T64)) m |= 1ull << (4 * j + 0);
            if ((full || e0 + 1 < nS) && ge_thr<KEYONLY>(v.y, e0 + 1, T32, T64)) m |= 1ull << (4 * j + 1);
            if ((full || e0 + 2 < nS) && ge_thr<KEYONLY>(v.z, e0 + 2, T32, T64)) m |= 1ull << (4 * j + 2);
            if ((full || e0 + 3 < nS) && ge_thr<KEYONLY>(v.w, e0 + 3, T32, T64)) m |= 1ull << (4 * j + 3);
        }
    }
    unsigned rm = 0;
#pragma unroll
    for (int i = 0; i < RS; ++i) {
        const int e = ridx(i, tid);
        if (e < N && ge_thr<KEYONLY>(rk[i], e, T32, T64)) rm |= 1u << i;
    }
    const unsigned cnt = (unsigned)__popcll(m) + (unsigned)__popc(rm);
    int off = (int)block_excl_scan(cnt, wsum);
    while (m) {
        const int b = __ffsll((long long)m) - 1;
        m &= m - 1;
        const int e = 4 * (tid + (b >> 2) * NT) + (b & 3);
        wr(off++, skeys[e], e);
    }
#pragma unroll
    for (int i = 0; i < RS; ++i)
        if (rm & (1u << i)) wr(off++, rk[i], ridx(i, tid));
}

// Histogram of the next digit over stash elements whose prefix (>> shp) equals Pp.
__device__ __forceinline__ void hist_stash(const unsigned* skeys, const unsigned (&rk)[RS], int N,
                                           int nS, unsigned* hist, u64 Pp, int shp, int sh,
                                           unsigned msk) {
    const int tid = threadIdx.x;
    for (int e = tid; e < nS; e += NT) {
        const u64 c = mkc(skeys[e], e);
        if ((c >> shp) == Pp) atomicAdd(&hist[(unsigned)(c >> sh) & msk], 1u);
    }
#pragma unroll
    for (int i = 0; i < RS; ++i) {
        const int e = ridx(i, tid);
        if (e < N) {
            const u64 c = mkc(rk[i], e);
            if ((c >> shp) == Pp) atomicAdd(&hist[(unsigned)(c >> sh) & msk], 1u);
        }
    }
}

// Same on the candidate buffer.
__device__ __forceinline__ void hist_buf(const unsigned* Bkey, const unsigned short* Bidx, int M,
                                         unsigned* hist, u64 Pp, int shp, int sh, unsigned msk) {
#pragma unroll
    for (int j = 0; j < BJ; ++j) {
        const int i = threadIdx.x + j * NT;
        if (i < M) {
            const u64 c = mkc(Bkey[i], (int)Bidx[i]);
            if ((c >> shp) == Pp) atomicAdd(&hist[(unsigned)(c >> sh) & msk], 1u);
        }
    }
}

// Compact buffer entries with composite >= T through wr(pos, key, index). All threads call it.
template <class W>
__device__ __forceinline__ void compact_buf(const unsigned* Bkey, const unsigned short* Bidx,
                                            int M, u64 T, unsigned* wsum, W wr) {
    unsigned m = 0;
#pragma unroll
    for (int j = 0; j < BJ; ++j) {
        const int i = threadIdx.x + j * NT;
        if (i < M && mkc(Bkey[i], (int)Bidx[i]) >= T) m |= 1u << j;
    }
    int off = (int)block_excl_scan((unsigned)__popc(m), wsum);
#pragma unroll
    for (int j = 0; j < BJ; ++j) {
        if (m & (1u << j)) {
            const int i = threadIdx.x + j * NT;
            wr(off++, Bkey[i], (int)Bidx[i]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the fast single-CTA kernel (round1-c3) + output warming
// ---------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(NT, 1)
topk_fast_kernel(float* __restrict__ out_v, int* __restrict__ out_i,
                 const float* __restrict__ input, int N, int kk) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ unsigned s_wsum[32];
    __shared__ unsigned s_res[4];

    unsigned* skeys = reinterpret_cast<unsigned*>(smem);                 // stash (region A)
    unsigned char* breg = smem + SCAP * 4;                               // region B
    unsigned* hist0 = reinterpret_cast<unsigned*>(breg);                 // level hist while on stash
    unsigned* Bkey = reinterpret_cast<unsigned*>(breg);                  // candidate keys
    unsigned short* Bidx = reinterpret_cast<unsigned short*>(breg + CCAP * 4);  // candidate idx

    const int tid = threadIdx.x;
    const int nS = N < SCAP ? N : SCAP;
    const bool vec = (reinterpret_cast<uintptr_t>(input) & 15) == 0;

    reinterpret_cast<uint4*>(hist0)[tid] = make_uint4(0u, 0u, 0u, 0u);

    // ---- issue all loads up front: smem part by cp.async in 4 stages, register part by LDG ----
    const int nS4 = vec ? (nS >> 2) : 0;
    if (vec) {
#pragma unroll
        for (int g = 0; g < 4; ++g) {
#pragma unroll
            for (int u = 0; u < SQ / 4; ++u) {
                const int q = tid + (g * (SQ / 4) + u) * NT;
                if (q < nS4) cp_async16(skeys + 4 * q, input + 4 * q);
            }
            cp_async_commit();
        }
    } else {
#pragma unroll
        for (int g = 0; g < 4; ++g) {
#pragma unroll
            for (int u = 0; u < SE / 4; ++u) {
                const int e = tid + (g * (SE / 4) + u) * NT;
                if (e < nS) cp_async4(skeys + e, input + e);
            }
            cp_async_commit();
        }
    }

    unsigned rk[RS];
#pragma unroll
    for (int j = 0; j < RS / 4; ++j) {
        const int base = SCAP + 4 * (j * NT + tid);
        if (vec && base + 3 < N) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(input + base));
            rk[4 * j + 0] = __float_as_uint(f.x);
            rk[4 * j + 1] = __float_as_uint(f.y);
            rk[4 * j + 2] = __float_as_uint(f.z);
            rk[4 * j + 3] = __float_as_uint(f.w);
        } else {
#pragma unroll
            for (int c = 0; c < 4; ++c)
                rk[4 * j + c] = (base + c < N) ? __float_as_uint(__ldg(input + base + c)) : 0u;
        }
    }

    // ---- warm the output lines / translations while the input loads are in flight ----
    if (tid >= NT - 64) {
        const int t = tid - (NT - 64);
        if (t < 32) warm_range(out_v, kk * 4, t, 32);
        else warm_range(out_i, kk * 4, t - 32, 32);
    }

    __syncthreads();  // hist0 cleared

    // ---- pass 1: convert to keys and build the 12-bit histogram as the stages land ----
    if (vec) {
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            cp_async_wait_stage(g);
#pragma unroll
            for (int u = 0; u < SQ / 4; ++u) {
                const int q = tid + (g * (SQ / 4) + u) * NT;
                if (q < nS4) {
                    uint4 v = reinterpret_cast<const uint4*>(skeys)[q];
                    v.x = f2k(v.x);
                    v.y = f2k(v.y);
                    v.z = f2k(v.z);
                    v.w = f2k(v.w);
                    atomicAdd(&hist0[v.x >> 20], 1u);
                    atomicAdd(&hist0[v.y >> 20], 1u);
                    atomicAdd(&hist0[v.z >> 20], 1u);
                    atomicAdd(&hist0[v.w >> 20], 1u);
                    reinterpret_cast<uint4*>(skeys)[q] = v;
                }
            }
        }
        const int t0 = nS4 * 4;
        if (tid < nS - t0) {
            const int e = t0 + tid;
            const unsigned key = f2k(__float_as_uint(__ldg(input + e)));
            skeys[e] = key;
            atomicAdd(&hist0[key >> 20], 1u);
        }
    } else {
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            cp_async_wait_stage(g);
#pragma unroll 4
            for (int u = 0; u < SE / 4; ++u) {
                const int e = tid + (g * (SE / 4) + u) * NT;
                if (e < nS) {
                    const unsigned key = f2k(skeys[e]);
                    skeys[e] = key;
                    atomicAdd(&hist0[key >> 20], 1u);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RS; ++i) {
        const int e = ridx(i, tid);
        if (e < N) {
            const unsigned key = f2k(rk[i]);
            rk[i] = key;
            atomicAdd(&hist0[key >> 20], 1u);
        }
    }
    __syncthreads();

    // ---- level 0 select ----
    select_bin(hist0, (unsigned)kk, s_wsum, s_res);
    u64 P = (u64)s_res[0];
    int G = (int)s_res[1];   // elements with prefix > P
    int C = (int)s_res[2];   // elements with prefix == P
    int L = 0;
    bool onB = false;
    int M = 0;

    // ---- refine until exactly kk elements have prefix >= P ----
    while (G + C != kk && L < 4) {
        if (!onB && G + C <= CCAP) {
            const u64 T = P << lsh(L);
            auto wrB = [=](int pos, unsigned key, int e) {
                if (pos < CCAP) {
                    Bkey[pos] = key;
                    Bidx[pos] = (unsigned short)e;
                }
            };
            if (lsh(L) >= 16)
                compact_stash<true>(skeys, rk, N, nS, (unsigned)(T >> 16), T, s_wsum, wrB);
            else
                compact_stash<false>(skeys, rk, N, nS, 0u, T, s_wsum, wrB);
            M = G + C;
            onB = true;
            __syncthreads();
        }
        const int L1 = L + 1;
        const int shp = lsh(L), sh = lsh(L1);
        const unsigned msk = (1u << lw(L1)) - 1u;
        unsigned* hist = onB ? skeys : hist0;   // once on the buffer, the stash region is free
        reinterpret_cast<uint4*>(hist)[tid] = make_uint4(0u, 0u, 0u, 0u);
        __syncthreads();
        if (onB)
            hist_buf(Bkey, Bidx, M, hist, P, shp, sh, msk);
        else
            hist_stash(skeys, rk, N, nS, hist, P, shp, sh, msk);
        __syncthreads();
        select_bin(hist, (unsigned)(kk - G), s_wsum, s_res);
        P = (P << lw(L1)) | (u64)s_res[0];
        G += (int)s_res[1];
        C = (int)s_res[2];
        L = L1;
    }

    // ---- collect the exactly-kk survivors ----
    u64* Fc;
    unsigned* R;
    if (onB) {
        Fc = reinterpret_cast<u64*>(smem + 16384);
        R = reinterpret_cast<unsigned*>(smem + 16384 + KMAX * 8);
    } else {
        Fc = reinterpret_cast<u64*>(breg + 16384);
        R = reinterpret_cast<unsigned*>(breg + 16384 + KMAX * 8);
    }
    if (tid < kk) R[tid] = 0u;
    {
        const u64 T = P << lsh(L);
        auto wrF = [=](int pos, unsigned key, int e) {
            if (pos < KMAX) Fc[pos] = mkc(key, e);
        };
        if (onB)
            compact_buf(Bkey, Bidx, M, T, s_wsum, wrF);
        else if (lsh(L) >= 16)
            compact_stash<true>(skeys, rk, N, nS, (unsigned)(T >> 16), T, s_wsum, wrF);
        else
            compact_stash<false>(skeys, rk, N, nS, 0u, T, s_wsum, wrF);
    }
    __syncthreads();

    // ---- rank by count (composites are distinct -> a permutation) ----
    {
        const int parts = NT / kk;
        const int chunk = (kk + parts - 1) / parts;
        if (tid < parts * kk) {
            const int i = tid % kk, p = tid / kk;
            const u64 c = Fc[i];
            const int lo = p * chunk;
            const int hi = (lo + chunk < kk) ? lo + chunk : kk;
            unsigned cnt = 0;
            for (int j = lo; j < hi; ++j) cnt += (Fc[j] > c) ? 1u : 0u;
            if (cnt) atomicAdd(&R[i], cnt);
        }
    }
    __syncthreads();
    if (tid < kk) {
        const unsigned r = R[tid];
        const u64 c = Fc[tid];
        if (r < (unsigned)kk) {
            out_v[r] = k2f((unsigned)(c >> 16));
            out_i[r] = (int)(0xFFFFu - (unsigned)(c & 0xFFFFull));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// cluster path helpers
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void cl_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cl_arrive() {   // release semantics (default)
    asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cl_wait() {     // acquire semantics (default)
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

// Number of entries of a[0..31] (sorted descending) strictly greater than v. 6 loads.
__device__ __forceinline__ int count_gt32(const u64* a, u64 v) {
    int lo = 0;
    lo += (a[15] > v) ? 16 : 0;
    lo += (a[lo + 7] > v) ? 8 : 0;
    lo += (a[lo + 3] > v) ? 4 : 0;
    lo += (a[lo + 1] > v) ? 2 : 0;
    lo += (a[lo] > v) ? 1 : 0;
    lo += (a[lo] > v) ? 1 : 0;   // only matters when lo == 31
    return lo;
}

// Block-wide sum for an NTH-thread block; red holds 32 words; every thread gets the total.
// One __syncthreads; callers alternate two red buffers between consecutive calls.
template <int NTH>
__device__ __forceinline__ unsigned block_sum(unsigned v, unsigned* red) {
    constexpr int NW = NTH / 32;
    v = __reduce_add_sync(0xffffffffu, v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const unsigned t = ((int)(threadIdx.x & 31) < NW) ? red[threadIdx.x & 31] : 0u;
    return __reduce_add_sync(0xffffffffu, t);
}

// The kk-th largest of the n distinct composites get(0..n-1) (n >= kk >= 1), by bisection over
// the 48 composite bits. red must hold 64 words. All threads call it.
template <int NTH, class F>
__device__ u64 bisect_kth(int n, unsigned kk, F get, unsigned* red) {
    u64 T = 0;
    for (int bit = 47; bit >= 0; --bit) {
        const u64 cand = T | (1ull << bit);
        unsigned cnt = 0;
#pragma unroll 8
        for (int i = (int)threadIdx.x; i < n; i += NTH) cnt += (get(i) >= cand) ? 1u : 0u;
        const unsigned tot = block_sum<NTH>(cnt, red + ((bit & 1) << 5));
        if (tot >= kk) T = cand;
    }
    return T;
}

// Rank the n (1 <= n <= NTH) distinct composites of L by counting and write those with
// rank < kk. R[0..n-1] must be zero. All threads call it.
template <int NTH>
__device__ __forceinline__ void rank_write(const u64* L, int n, int kk, unsigned* R,
                                           float* __restrict__ out_v, int* __restrict__ out_i) {
    const int tid = threadIdx.x;
    const int parts = NTH / n;
    const int chunk = (n + parts - 1) / parts;
    if (tid < parts * n) {
        const int i = tid % n, p = tid / n;
        const u64 c = L[i];
        const int lo = p * chunk;
        const int hi = (lo + chunk < n) ? lo + chunk : n;
        unsigned cnt = 0;
        for (int j = lo; j < hi; ++j) cnt += (L[j] > c) ? 1u : 0u;
        if (cnt) atomicAdd(&R[i], cnt);
    }
    __syncthreads();
    if (tid < n) {
        const unsigned r = R[tid];
        if (r < (unsigned)kk) {
            const u64 c = L[tid];
            out_v[r] = k2f((unsigned)(c >> 16));
            out_i[r] = (int)(0xFFFFu - (unsigned)(c & 0xFFFFull));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the cluster kernel: CS CTAs x NTH threads x EPT elements (N <= CS * NTH * EPT <= 65536)
// ---------------------------------------------------------------------------------------------
template <int CS, int NTH, int EPT>
__global__ void __launch_bounds__(NTH, 1)
topk_cluster_kernel(float* __restrict__ out_v, int* __restrict__ out_i,
                    const float* __restrict__ input, int N, int kk) {
    static_assert(CS * NTH * EPT <= CL_NMAX, "16-bit index in the composite");
    static_assert(CS >= 2 && CS <= 16 && (CS & (CS - 1)) == 0, "cluster size");
    static_assert(NTH >= CL_KMAX && NTH <= 1024 && (NTH & (NTH - 1)) == 0, "threads per CTA");
    constexpr int NTOT = CS * NTH;
    constexpr int NW = NTH / 32;   // warps per CTA
    constexpr int GS = NTH / 32;   // threads per sample group (32 samples per CTA)

    __shared__ u64 s_runs[CS * RSTR];   // sorted runs of samples, one per CTA
    __shared__ u64 s_wmax[32];
    __shared__ unsigned s_rank[32];
    __shared__ u64 s_buf[CL_CAP];       // leader: candidate composites
    __shared__ u64 s_fin[CL_KMAX];      // leader: exactly-kk list (overflow paths)
    __shared__ unsigned s_R[NTH];       // leader: rank counters
    __shared__ unsigned s_red[64];
    __shared__ unsigned s_cnt;          // leader: candidate counter
    __shared__ unsigned s_fcnt;

    cg::cluster_group cluster = cg::this_cluster();
    const int crank = (int)cluster.block_rank();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    TL_MARK(crank, 0);
    cl_arrive_relaxed();   // "this CTA has started"; matched by the wait before DSMEM stores

    // ---- loads: element e belongs to global thread e mod NTOT ----
    const int g = crank * NTH + tid;
    unsigned key[EPT];
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const int e = g + j * NTOT;
        key[j] = (e < N) ? __float_as_uint(__ldg(input + e)) : 0u;
    }

    // ---- leader: warm the output lines / translations under the input's DRAM latency ----
    if (crank == 0 && warp == NW - 1) {
        if (lane < 16) warm_range(out_v, kk * 4, lane, 16);
        else warm_range(out_i, kk * 4, lane - 16, 16);
    }

    s_R[tid] = 0u;
    if (tid == 0) {
        s_cnt = 0u;
        s_fcnt = 0u;
    }

    // ---- per-thread max composite, group max -> 32 samples per CTA ----
    u64 best = 0;
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const int e = g + j * NTOT;
        if (e < N) {
            key[j] = f2k(key[j]);
            const u64 c = mkc(key[j], e);
            best = (c > best) ? c : best;
        }
    }
    if (GS == 32) {
        const unsigned hi = (unsigned)(best >> 16);
        const unsigned mh = __reduce_max_sync(0xffffffffu, hi);
        const unsigned lo = (hi == mh) ? (unsigned)(best & 0xFFFFull) : 0u;
        const unsigned ml = __reduce_max_sync(0xffffffffu, lo);
        if (lane == 0) s_wmax[warp] = ((u64)mh << 16) | (u64)ml;
    } else {
        u64 m = best;
#pragma unroll
        for (int o = GS / 2; o >= 1; o >>= 1) {
            const u64 y = __shfl_xor_sync(0xffffffffu, m, o);
            m = (y > m) ? y : m;
        }
        if ((tid & (GS - 1)) == 0) s_wmax[tid / GS] = m;
    }
    __syncthreads();
    TL_MARK(crank, 1);
    cl_wait();   // every CTA of the cluster is running: DSMEM may be written

    // ---- warp 0: sort the 32 samples (rank by count) and broadcast the run ----
    if (warp == 0) {
        const u64 v = s_wmax[lane];
        int r = 0;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const u64 w = s_wmax[j];
            r += (w > v || (w == v && j < lane)) ? 1 : 0;
        }
#pragma unroll
        for (int t = 0; t < CS; ++t) {
            u64* dst = cluster.map_shared_rank(s_runs, (unsigned)t);
            dst[crank * RSTR + r] = v;
        }
    }
    cl_arrive();   // barrier #1
    cl_wait();
    TL_MARK(crank, 2);

    // ---- global rank of each own sample: one binary search per (own sample, run) ----
    for (int t = tid; t < CS * 32; t += NTH) {   // whole warps (CS * 32 and NTH are x32)
        const int s = t / CS, rr = t % CS;
        const u64 v = s_runs[crank * RSTR + s];
        unsigned c = (unsigned)count_gt32(s_runs + rr * RSTR, v);
#pragma unroll
        for (int o = CS / 2; o >= 1; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
        if (rr == 0) s_rank[s] = c;
    }
    __syncthreads();

    // ---- threshold: own highest sample with global rank >= kk-1 (<= the true kk-th) ----
    u64 theta;
    {
        const unsigned rs = s_rank[lane];
        const unsigned bq = __ballot_sync(0xffffffffu, rs + 1u < (unsigned)kk);
        const int q = __popc(bq);   // ranks are nondecreasing along the run: a prefix
        theta = (q < 32) ? s_runs[crank * RSTR + q] : 0ull;
    }

    // ---- filter and append to the leader (warp-aggregated DSMEM atomics) ----
    {
        u64 cc[EPT];
        bool pr[EPT];
        unsigned bal[EPT];
        unsigned tot = 0;
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const int e = g + j * NTOT;
            cc[j] = mkc(key[j], e);
            pr[j] = (e < N) && (cc[j] >= theta);
            bal[j] = __ballot_sync(0xffffffffu, pr[j]);
            tot += (unsigned)__popc(bal[j]);
        }
        if (tot) {   // warp-uniform
            unsigned base = 0;
            if (lane == 0) base = atomicAdd(cluster.map_shared_rank(&s_cnt, 0u), tot);
            base = __shfl_sync(0xffffffffu, base, 0);
            u64* rbuf = cluster.map_shared_rank(s_buf, 0u);
            const unsigned lt = (1u << lane) - 1u;
#pragma unroll
            for (int j = 0; j < EPT; ++j) {
                if (pr[j]) {
                    const unsigned pos = base + (unsigned)__popc(bal[j] & lt);
                    if (pos < (unsigned)CL_CAP) rbuf[pos] = cc[j];
                }
                base += (unsigned)__popc(bal[j]);
            }
        }
    }
    cl_arrive();   // barrier #2
    cl_wait();
    TL_MARK(crank, 3);
    if (crank != 0) return;

    // ---- leader: exact selection among the candidates ----
    const unsigned C = s_cnt;
    if (C <= (unsigned)NTH) {
        rank_write<NTH>(s_buf, (int)C, kk, s_R, out_v, out_i);
        TL_MARK(0, 4);
        return;
    }
    const u64* bufp = s_buf;
    u64* finp = s_fin;
    unsigned* fcnt = &s_fcnt;
    if (C <= (unsigned)CL_CAP) {
        const int n = (int)C;
        const u64 T =
            bisect_kth<NTH>(n, (unsigned)kk, [=](int i) -> u64 { return bufp[i]; }, s_red);
        for (int i = tid; i < n; i += NTH) {
            const u64 c = bufp[i];
            if (c >= T) {
                const unsigned p = atomicAdd(fcnt, 1u);
                if (p < (unsigned)CL_KMAX) finp[p] = c;
            }
        }
    } else {
        const float* inp = input;
        const u64 T = bisect_kth<NTH>(
            N, (unsigned)kk,
            [=](int i) -> u64 { return mkc(f2k(__float_as_uint(__ldg(inp + i))), i); }, s_red);
        for (int i = tid; i < N; i += NTH) {
            const u64 c = mkc(f2k(__float_as_uint(__ldg(inp + i))), i);
            if (c >= T) {
                const unsigned p = atomicAdd(fcnt, 1u);
                if (p < (unsigned)CL_KMAX) finp[p] = c;
            }
        }
    }
    __syncthreads();
    rank_write<NTH>(s_fin, kk, kk, s_R, out_v, out_i);
    TL_MARK(0, 4);
}

// ---------------------------------------------------------------------------------------------
// generic fallback: stable CUB radix sort of (~key, index), ascending == descending value with
// ascending index among equal values
// ---------------------------------------------------------------------------------------------
__global__ void fb_init(const float* __restrict__ in, unsigned* __restrict__ keys,
                        int* __restrict__ idx, int N) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < N) {
        keys[t] = ~f2k(__float_as_uint(in[t]));
        idx[t] = t;
    }
}

__global__ void fb_out(const float* __restrict__ in, const int* __restrict__ idx,
                       float* __restrict__ vals, int* __restrict__ idxs, int kk) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < kk) {
        const int i = idx[t];
        vals[t] = in[i];
        idxs[t] = i;
    }
}

static void topk_fallback(float* vals, int* idxs, const float* input, int N, int kk) {
    unsigned* k0 = nullptr;
    unsigned* k1 = nullptr;
    int* i0 = nullptr;
    int* i1 = nullptr;
    void* tmp = nullptr;
    size_t tb = 0;
    cudaMalloc(&k0, (size_t)N * sizeof(unsigned));
    cudaMalloc(&k1, (size_t)N * sizeof(unsigned));
    cudaMalloc(&i0, (size_t)N * sizeof(int));
    cudaMalloc(&i1, (size_t)N * sizeof(int));
    fb_init<<<(unsigned)((N + 255) / 256), 256>>>(input, k0, i0, N);
    cub::DeviceRadixSort::SortPairs(nullptr, tb, k0, k1, i0, i1, N);
    cudaMalloc(&tmp, tb ? tb : 16);
    cub::DeviceRadixSort::SortPairs(tmp, tb, k0, k1, i0, i1, N);
    fb_out<<<(unsigned)((kk + 255) / 256), 256>>>(input, i1, vals, idxs, kk);
    cudaDeviceSynchronize();
    cudaFree(tmp);
    cudaFree(k0);
    cudaFree(k1);
    cudaFree(i0);
    cudaFree(i1);
}

static int g_fast_state = 0;  // 0 unknown, 1 usable, -1 not usable

static bool fast_ready() {
    if (g_fast_state == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        int optin = 0;
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        if (optin >= SMEM_DYN + 256 &&
            cudaFuncSetAttribute(topk_fast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 SMEM_DYN) == cudaSuccess) {
            g_fast_state = 1;
        } else {
            cudaGetLastError();
            g_fast_state = -1;
        }
    }
    return g_fast_state == 1;
}

// ---------------------------------------------------------------------------------------------
// cluster launch: set up once per shape, then a cached cudaLaunchKernelEx
// ---------------------------------------------------------------------------------------------
static int g_cl_dev_ok = 0;   // 0 unknown, 1 cluster launch supported, -1 not

static bool cluster_supported() {
    if (g_cl_dev_ok == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        int cl = 0;
        if (cudaDeviceGetAttribute(&cl, cudaDevAttrClusterLaunch, dev) != cudaSuccess) {
            cudaGetLastError();
            cl = 0;
        }
        g_cl_dev_ok = cl ? 1 : -1;
    }
    return g_cl_dev_ok == 1;
}

template <int CS, int NTH, int EPT>
static bool cluster_setup(cudaLaunchConfig_t& cfg, cudaLaunchAttribute* attr) {
    void (*kern)(float*, int*, const float*, int, int) = topk_cluster_kernel<CS, NTH, EPT>;
    if (CS > 8) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
            cudaSuccess) {
            cudaGetLastError();
            return false;
        }
    }
    cfg = cudaLaunchConfig_t{};
    cfg.gridDim = dim3(CS, 1, 1);
    cfg.blockDim = dim3(NTH, 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = 0;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CS;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int ncl = 0;
    if (cudaOccupancyMaxActiveClusters(&ncl, (const void*)kern, &cfg) != cudaSuccess || ncl < 1) {
        cudaGetLastError();
        return false;
    }
    return true;
}

template <int CS, int NTH, int EPT>
static bool cluster_launch(float* vals, int* idxs, const float* input, int N, int kk) {
    static int state = 0;   // 0 unknown, 1 usable, -1 not usable
    static cudaLaunchConfig_t cfg;
    static cudaLaunchAttribute attr[1];
    if (state == 0) {
        state = (cluster_supported() && cluster_setup<CS, NTH, EPT>(cfg, attr)) ? 1 : -1;
        cudaGetLastError();
    }
    if (state < 0) return false;
    if (cudaLaunchKernelEx(&cfg, topk_cluster_kernel<CS, NTH, EPT>, vals, idxs, input, N, kk) ==
        cudaSuccess)
        return true;
    cudaGetLastError();
    return false;
}

}  // namespace

#ifdef TOPK_TIMELINE
// Debug only: copies the per-CTA timeline (16 CTAs x 8 globaltimer stamps, ns) of the last call.
extern "C" int top_k_timeline(unsigned long long* host) {
    return (int)cudaMemcpyFromSymbol(host, g_topk_tl, sizeof(unsigned long long) * 16 * 8);
}
#endif

extern "C" void top_k(float* top_k_values, int* top_k_indices, const float* input, const int N,
                      const int k) {
    if (N > 0 && k > 0) {
        const int kk = k < N ? k : N;
        bool done = false;
        if (N >= CL_NMIN && N <= CL_NMAX && kk <= CL_KMAX) {
#if TOPK_B_NMAX > 0
            if (N <= TOPK_B_NMAX && kk <= cl_kmax(TOPK_B_CS))
                done = cluster_launch<TOPK_B_CS, TOPK_B_NT, TOPK_B_EPT>(
                    top_k_values, top_k_indices, input, (int)N, (int)kk);
#endif
            if (!done && kk <= cl_kmax(TOPK_A_CS))
                done = cluster_launch<TOPK_A_CS, TOPK_A_NT, TOPK_A_EPT>(
                    top_k_values, top_k_indices, input, (int)N, (int)kk);
            if (!done && kk <= cl_kmax(8))
                done = cluster_launch<8, 1024, 8>(top_k_values, top_k_indices, input, (int)N,
                                                  (int)kk);
        }
        if (!done && N <= CAP_FAST && kk <= KMAX && fast_ready()) {
            topk_fast_kernel<<<1, NT, SMEM_DYN>>>(top_k_values, top_k_indices, input, N, kk);
            done = (cudaGetLastError() == cudaSuccess);
        }
        if (!done) topk_fallback(top_k_values, top_k_indices, input, N, kk);
    }
    cudaDeviceSynchronize();
}
