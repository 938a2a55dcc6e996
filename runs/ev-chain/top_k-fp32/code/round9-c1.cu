// top_k (fp32): the k largest of input[N] in descending order with their int32 positions;
// equal values ordered by ascending index.
//
// Fast path (N <= 65536, k <= 1024), one launch:
//   * N <= 4096: one plain 1024-thread block (no cluster), except kk >= 64 with N > 1024,
//                which goes through a cluster of ceil(N/1024) blocks x R=1.
//   * 4096 < N <= 32768 : cluster of ceil(N/4096) blocks x 1024 threads x R=4
//                         (TK_MID_SHAPE=1: ceil(N/2048) blocks x R=2 for N <= 16384).
//   * N > 32768         : non-portable cluster of ceil(N/4096) (<= 16) blocks x R=4 when the
//                         device can schedule 16-CTA clusters (checked once), else the
//                         cluster of ceil(N/8192) (<= 8) blocks x R=8.
// Every element is kept in registers as its 32-bit order-preserving value m (-0.0 folded
// into +0.0); its position follows from (block, thread, slot). 64-bit keys
//   key = m << 32 | ~index      ("descending key" == "descending value, ties by ascending index")
// are built only for surviving candidates.
//
// Thresholds from group maxima: each warp owns NB = B/32 disjoint groups of its elements; the
// k'-th largest of the B group maxima of a block is a value that at least k' elements of the
// block reach.
//
// Single block: stage m >= t_kb, rank all-pairs, write the outputs.
//
// Cluster (one exchange on the common path):
//   every block picks t_q (q-th largest group max, q = kb + 4*ceil(sqrt(kb)) + 4 capped at kk)
//   and t_kb (kb-th largest, kb = ceil(kk/cs)); stages m >= t_q, ranks them locally and
//   pushes its first min(c, kk) keys (sorted) into its slot of EVERY block's candidate area,
//   together with (t_q, t_kb, count). One cluster barrier (A). Every block then checks, on
//   identical data, that the union X of the runs is guaranteed to contain the top-kk:
//     q == kk, or  #{x in X : m(x) >= max_b t_q[b]} >= kk   (and no run overflowed).
//   Valid: each block ranks its own run entries against the other runs (binary search) and
//   writes those with global rank < kk. No DSMEM access after barrier A.
//   Invalid (sorted inputs, ...): cluster sync, then the exact path with T = min_b t_kb[b]:
//   stage, local rank, push to block 0, barrier, block-0 merge; if any block overflows its
//   slot (ties, ...), the cluster-wide MSB radix select.
// Fallback for larger shapes or a failed launch: CUB device radix sort of the keys.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cub/cub.cuh>
#include <stdint.h>
#include <string.h>

namespace cg = cooperative_groups;

typedef unsigned long long u64;

#ifndef TK_USE_C16
#define TK_USE_C16 1         // 16-CTA (non-portable) cluster path for N > 32768
#endif
#ifndef TK_MID_SHAPE
#define TK_MID_SHAPE 0       // 4096 < N <= 16384: 0 = ceil(N/4096) x R=4, 1 = ceil(N/2048) x R=2
#endif

#define TK_THREADS 1024
#define TK_CAP 4096          // candidate area (u64), aliases the radix pass-0 histogram
#define TK_STAGE 1024        // per-block staging (u64), aliases the radix block histograms
#define TK_MAXG 256          // max group maxima per block
#define TK_MAXCS 16          // max cluster size
#define TK_FB_STOP 2048      // radix fallback: stop narrowing at <= this many candidates
#define TK_FAST_MAX_N 65536
#define TK_FAST_MAX_K 1024
#define TK_FULL 0xffffffffu

// ------------------------------------------------------------------------------------------
// Key helpers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned tk_ord(float v) {
    unsigned u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;  // -0.0 == +0.0: tie broken by index
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ u64 tk_key(unsigned m, int idx) {
    return ((u64)m << 32) | (u64)(~(unsigned)idx);
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
// Shared memory layout (static, < 48 KB)
// ------------------------------------------------------------------------------------------
struct __align__(16) TkSmem {
    union {
        unsigned lp[256 * 32];     // radix fallback: pass-0 lane-private histogram (32 KB)
        u64 cand[TK_CAP];          // candidate runs                                (32 KB)
    } u;
    union {
        unsigned hist[2][1024];    // radix fallback: per-pass block histograms      (8 KB)
        u64 stage[TK_STAGE];       // fast path: this block's candidates             (8 KB)
    } v;
    unsigned gm[TK_MAXG];          // group maxima (16-byte aligned: offset 40960)
    unsigned wtot[32];
    unsigned tqa[TK_MAXCS];        // speculative: t_q of every block of the cluster
    unsigned tka[TK_MAXCS];        // speculative: t_kb of every block of the cluster
    unsigned scnt[TK_MAXCS];       // speculative: published run length of every block
    unsigned cnt[TK_MAXCS];        // exact path: published run length of every block
    unsigned tb;                   // this block's t_kb
    unsigned tq;                   // this block's t_q
    unsigned scount;               // staging counter (first staging)
    unsigned scount2;              // staging counter (exact staging after speculation)
    unsigned res_digit;
    unsigned res_gt;
    unsigned res_eq;
    unsigned res_base;
    unsigned cand_count;
};
static_assert(sizeof(TkSmem) <= 48 * 1024, "static shared memory too large");

// ------------------------------------------------------------------------------------------
// Cluster barrier pieces and misc helpers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ void tk_cl_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void tk_cl_arrive_release() {   // default semantics: release
    asm volatile("barrier.cluster.arrive.aligned;" ::: "memory");
}
__device__ __forceinline__ void tk_cl_wait() {             // default semantics: acquire
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ void tk_prefetch_l2(const void* p) {
    asm volatile("prefetch.L2 [%0];" :: "l"(p));
}


template <bool CL>
__device__ __forceinline__ void tk_sync(int cs) {
    if constexpr (CL) {
        if (cs > 1) { cg::this_cluster().sync(); return; }
    }
    __syncthreads();
}

template <typename T>
__device__ __forceinline__ T* tk_remote(T* p, int rank) {
    return cg::this_cluster().map_shared_rank(p, (unsigned)rank);
}

// ------------------------------------------------------------------------------------------
// Exact fallback: cluster-wide MSB radix select, then quadratic rank.
// Called uniformly by every block of the cluster. NR = max cluster size of the kernel.
// ------------------------------------------------------------------------------------------
template <int R, bool CL, int NR>
__device__ __forceinline__ void tk_radix_fallback(TkSmem& sm, const u64 (&key)[R], const unsigned vmask,
                                                  float* __restrict__ out_v, int* __restrict__ out_i,
                                                  const int N, const int kk, const int cs, const int crank)
{
    const int t = (int)threadIdx.x;
    const int lane = t & 31;
    const int warp = t >> 5;

    {
        uint4* lp4 = reinterpret_cast<uint4*>(sm.u.lp);
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        lp4[t] = z;
        lp4[t + TK_THREADS] = z;
        sm.v.hist[0][t] = 0u;
        sm.v.hist[1][t] = 0u;
        if (t == 0) sm.cand_count = 0u;
    }
    __syncthreads();

    int stop = kk + 64;
    if (stop < 128) stop = 128;
    if (stop > TK_FB_STOP) stop = TK_FB_STOP;

    // Invariant: gt = #keys with (key >> shift) > pref, M = #keys with (key >> shift) >= pref,
    //            gt < kk <= M. (shift == 64 means "no prefix yet".)
    int shift = 64;
    u64 pref = 0ull;
    unsigned gt = 0u;
    unsigned M = (unsigned)N;
    int pass = 0;
    while (M > (unsigned)stop && shift > 0) {
        const int width = (shift == 64) ? 8 : (shift < 10 ? shift : 10);
        const int nshift = shift - width;
        unsigned* H = sm.v.hist[pass & 1];

        if (pass == 0) {
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

        tk_sync<CL>(cs);

        if (pass > 0) sm.v.hist[(pass + 1) & 1][t] = 0u;

        const int nb = 1 << width;
        unsigned c = 0u;
        if (t < nb) {
            bool done = false;
            if constexpr (CL) {
                if (cs > 1) {
#pragma unroll
                    for (int r = 0; r < NR; ++r)
                        if (r < cs) c += tk_remote(H, r)[t];
                    done = true;
                }
            }
            if (!done) c = H[t];
        }

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
        const unsigned suf = x + above;
        const unsigned needed = (unsigned)kk - gt;
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

    if (pass == 0) tk_sync<CL>(cs);

    // ---- gather candidates (keys >= prefix) into block 0 ----
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
        unsigned* cc = &sm.cand_count;
        if constexpr (CL) { if (cs > 1) cc = tk_remote(&sm.cand_count, 0); }
        sm.res_base = atomicAdd(cc, btot);
    }
    __syncthreads();
    if (btot > 0u && cnt > 0u) {
        u64* cd = &sm.u.cand[0];
        if constexpr (CL) { if (cs > 1) cd = tk_remote(&sm.u.cand[0], 0); }
        unsigned pos = sm.res_base + wexcl + inc - cnt;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if ((selm >> r) & 1u) {
                if (pos < (unsigned)TK_CAP) cd[pos] = key[r];
                ++pos;
            }
        }
    }
    tk_sync<CL>(cs);
    if (crank != 0) return;

    int M2 = (int)sm.cand_count;
    if (M2 > TK_CAP) M2 = TK_CAP;
    const int q = TK_THREADS / (M2 > 0 ? M2 : 1);
    int lgS = 0;
    while (lgS < 5 && (2 << lgS) <= q) ++lgS;
    const int S = 1 << lgS;
    const int G = TK_THREADS >> lgS;
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
// Group maxima -> block thresholds.
// NB = B/32 groups per warp, B = 32*NB group maxima per block (NB in {1,2,4,8}).
// wa/ta: whether this warp owns a group whose maximum is the ka-th largest of the B maxima,
// and that value; wb/tb the same for kb2 (only when TWO). Both flags are warp-uniform.
// Contains one __syncthreads (uniform).
// ------------------------------------------------------------------------------------------
template <int NB>
__device__ __forceinline__ void tk_load_gm(const unsigned* p, unsigned (&o)[NB]) {
    if constexpr (NB == 1) {
        o[0] = p[0];
    } else if constexpr (NB == 2) {
        const uint2 a = *reinterpret_cast<const uint2*>(p);
        o[0] = a.x; o[1] = a.y;
    } else if constexpr (NB == 4) {
        const uint4 a = *reinterpret_cast<const uint4*>(p);
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w;
    } else {
        const uint4 a = *reinterpret_cast<const uint4*>(p);
        const uint4 b = *reinterpret_cast<const uint4*>(p + 4);
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w;
        o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
    }
}

template <int R, int NB, bool TWO>
__device__ __forceinline__ void tk_group_thresh(TkSmem& sm, const unsigned (&mv)[R],
                                                const unsigned ka, const unsigned kb2,
                                                const int warp, const int lane,
                                                bool& wa, unsigned& ta, bool& wb, unsigned& tb)
{
    if constexpr (NB <= R) {
        // slot groups: R/NB register slots x all 32 lanes
        constexpr int SPG = R / NB;
        unsigned mine = 0u;
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            unsigned tm = mv[j * SPG];
#pragma unroll
            for (int s = 1; s < SPG; ++s) tm = max(tm, mv[j * SPG + s]);
            tm = __reduce_max_sync(TK_FULL, tm);
            if (lane == j) mine = tm;
        }
        if (lane < NB) sm.gm[warp * NB + lane] = mine;
    } else {
        // lane groups: 32/NB lanes x all R slots
        constexpr int L = 32 / NB;
        unsigned tm = mv[0];
#pragma unroll
        for (int s = 1; s < R; ++s) tm = max(tm, mv[s]);
#pragma unroll
        for (int off = 1; off < L; off <<= 1) tm = max(tm, __shfl_xor_sync(TK_FULL, tm, off));
        if ((lane & (L - 1)) == 0) sm.gm[warp * NB + lane / L] = tm;
    }
    __syncthreads();

    unsigned g[NB], v[NB];
    tk_load_gm<NB>(&sm.gm[lane * NB], g);   // this lane's share of all B maxima
    tk_load_gm<NB>(&sm.gm[warp * NB], v);   // this warp's own maxima (broadcast)
    bool a_won = false, b_won = false;
    unsigned a_v = 0u, b_v = 0u;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        unsigned c2 = 0u;   // (#gm > v) << 16 | (#gm >= v)
#pragma unroll
        for (int i = 0; i < NB; ++i)
            c2 += (g[i] >= v[j] ? 1u : 0u) + (g[i] > v[j] ? 0x10000u : 0u);
        c2 = __reduce_add_sync(TK_FULL, c2);
        const unsigned gec = c2 & 0xFFFFu;
        const unsigned gtc = c2 >> 16;
        if (gtc < ka && gec >= ka) { a_won = true; a_v = v[j]; }
        if constexpr (TWO) {
            if (gtc < kb2 && gec >= kb2) { b_won = true; b_v = v[j]; }
        }
    }
    wa = a_won; ta = a_v;
    wb = b_won; tb = b_v;
}

// ------------------------------------------------------------------------------------------
// Staging of this block's candidates (valid slots with m >= T), warp-aggregated.
// Returns the block total (may exceed slot; only the first slot keys are stored).
// Contains one __syncthreads (uniform). *ctr must be 0 and visible on entry.
// ------------------------------------------------------------------------------------------
template <int R, typename F>
__device__ __forceinline__ unsigned tk_stage(TkSmem& sm, unsigned* ctr, const unsigned (&mv)[R],
                                             const unsigned vmask, const unsigned T,
                                             const unsigned slot, const int lane, F gpos)
{
    unsigned cnt = 0u;
    unsigned selm = 0u;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        if (((vmask >> r) & 1u) && mv[r] >= T) { selm |= 1u << r; ++cnt; }
    }

    const unsigned anyb = __ballot_sync(TK_FULL, cnt > 0u);
    if (anyb != 0u) {                                            // warp-uniform
        const unsigned wsum = __reduce_add_sync(TK_FULL, cnt);
        unsigned base = 0u;
        if (lane == 0) base = atomicAdd(ctr, wsum);
        base = __shfl_sync(TK_FULL, base, 0);
        unsigned excl;
        if (__all_sync(TK_FULL, cnt <= 1u)) {
            excl = __popc(anyb & ((1u << lane) - 1u));
        } else {
            unsigned inc = cnt;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const unsigned y = __shfl_up_sync(TK_FULL, inc, off);
                if (lane >= off) inc += y;
            }
            excl = inc - cnt;
        }
        unsigned pos = base + excl;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if ((selm >> r) & 1u) {
                if (pos < slot) sm.v.stage[pos] = tk_key(mv[r], gpos(r));
                ++pos;
            }
        }
    }
    __syncthreads();
    return *reinterpret_cast<volatile unsigned*>(ctr);
}

// ------------------------------------------------------------------------------------------
// Local exact rank of the c = btot (1..1024) staged keys: all-pairs over active warps only.
// emit(rk, key, sub, S) is called by every one of the S sub-lanes of each staged key whose
// rank rk < kk (all S sub-lanes hold the same rk).
// ------------------------------------------------------------------------------------------
template <typename F>
__device__ __forceinline__ void tk_local_rank(TkSmem& sm, const unsigned btot, const unsigned kk,
                                              const int t, F emit)
{
    const int c = (int)btot;                                     // 1 <= c <= 1024
    int lgS = 10 - (32 - __clz(c - 1));                          // S = largest pow2 with c*S <= 1024
    if (lgS > 5) lgS = 5;
    const int S = 1 << lgS;
    if ((t & ~31) < c * S) {                                     // warp-uniform: active warps only
        const int i = t >> lgS;
        const int sub = t & (S - 1);
        const u64 mine = (i < c) ? sm.v.stage[i] : ~0ull;
        unsigned rk = 0u;
#pragma unroll 4
        for (int j = sub; j < c; j += S) rk += (sm.v.stage[j] > mine) ? 1u : 0u;
        for (int off = S >> 1; off > 0; off >>= 1) rk += __shfl_xor_sync(TK_FULL, rk, off);
        if (i < c && rk < kk) emit(rk, mine, sub, S);
    }
}

// ------------------------------------------------------------------------------------------
// Fast kernel body.
//   CS == 1 : single plain block.
//   CS == 0 : cluster, runtime cluster size (cudaLaunchKernelEx), at most CMAX blocks.
//   CS >= 2 : cluster of compile-time size CS (grid == cluster == CS blocks).
//   kb = ceil(kk / cs), the per-block quota of the exact threshold
//   kq >= kb, the per-block speculative quota (clusters only)
//   nb = group maxima per warp (1,2,4,8), or 0 for "no threshold" (every element a candidate)
// ------------------------------------------------------------------------------------------
template <int R, int CS, int CMAX>
__device__ __forceinline__ void tk_body(TkSmem& sm, const float* __restrict__ input,
                                        float* __restrict__ out_v, int* __restrict__ out_i,
                                        const int N, const int kk, const int kb, const int nb,
                                        const int kq)
{
    constexpr bool CL = (CS != 1);
    constexpr int NRUN = (CS >= 2) ? CS : CMAX;
    static_assert(NRUN <= TK_MAXCS, "cluster too large");
    const int t = (int)threadIdx.x;
    const int lane = t & 31;
    const int warp = t >> 5;
    int cs = 1, crank = 0;
    if constexpr (CL) {
        if constexpr (CS >= 2) cs = CS;
        else cs = (int)cg::this_cluster().num_blocks();
        crank = (int)cg::this_cluster().block_rank();
    }

    // ---- load the chunk: every load issued before any loaded value is used ------------------
    unsigned mv[R];
    unsigned vmask = 0u;
    const int cbase = crank * (TK_THREADS * R);
    bool vec = false;
    if constexpr (R >= 4) {
        vec = ((reinterpret_cast<uintptr_t>(input) & (uintptr_t)15) == 0);
        if (vec) {
            if (cbase + TK_THREADS * R <= N) {                   // CTA-uniform: full chunk
                float4 a[R / 4];
#pragma unroll
                for (int q = 0; q < R / 4; ++q)
                    a[q] = __ldg(reinterpret_cast<const float4*>(input + cbase + q * (TK_THREADS * 4) + t * 4));
#pragma unroll
                for (int q = 0; q < R / 4; ++q) {
                    mv[4 * q + 0] = tk_ord(a[q].x);
                    mv[4 * q + 1] = tk_ord(a[q].y);
                    mv[4 * q + 2] = tk_ord(a[q].z);
                    mv[4 * q + 3] = tk_ord(a[q].w);
                }
                vmask = (1u << R) - 1u;
            } else {                                             // partial chunk: clamped loads
                float f[R];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int g = cbase + (r >> 2) * (TK_THREADS * 4) + t * 4 + (r & 3);
                    f[r] = __ldg(input + min(g, N - 1));
                }
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int g = cbase + (r >> 2) * (TK_THREADS * 4) + t * 4 + (r & 3);
                    const bool ok = g < N;
                    mv[r] = ok ? tk_ord(f[r]) : 0u;
                    vmask |= (ok ? 1u : 0u) << r;
                }
            }
        }
    }
    if (!vec) {
        float f[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int g = cbase + r * TK_THREADS + t;
            f[r] = __ldg(input + min(g, N - 1));
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int g = cbase + r * TK_THREADS + t;
            const bool ok = g < N;
            mv[r] = ok ? tk_ord(f[r]) : 0u;
            vmask |= (ok ? 1u : 0u) << r;
        }
    }
    // position of slot r of this thread
    auto gpos = [&](int r) -> int {
        if constexpr (R >= 4) {
            if (vec) return cbase + (r >> 2) * (TK_THREADS * 4) + t * 4 + (r & 3);
        }
        return cbase + r * TK_THREADS + t;
    };

    // Start the page walk of the outputs while the input loads are in flight (every block
    // may write outputs on the speculative path).
    if (t == 0) {
        tk_prefetch_l2(out_v);
        tk_prefetch_l2(out_v + (kk - 1));
        tk_prefetch_l2(out_i);
        tk_prefetch_l2(out_i + (kk - 1));
        sm.scount = 0u;
        sm.scount2 = 0u;
    }

    // Start-up barrier of the cluster (all blocks running before any DSMEM access),
    // arrived at now, waited on just before the first remote store.
    if constexpr (CL) tk_cl_arrive_relaxed();

    unsigned slot = TK_STAGE;
    if constexpr (CL) {
        const unsigned s2 = (unsigned)TK_CAP / (unsigned)cs;
        if (s2 < slot) slot = s2;
    }

    // ---- block thresholds -------------------------------------------------------------------
    unsigned T = 0u;        // single block: t_kb of this block; cluster: exact T (set below)
    bool spec = false;      // cluster with thresholds: speculative single-exchange path
    if (nb > 0) {
        bool wa = false, wb = false;
        unsigned ta = 0u, tbq = 0u;
        switch (nb) {
            case 1:  tk_group_thresh<R, 1, CL>(sm, mv, (unsigned)kb, (unsigned)kq, warp, lane, wa, ta, wb, tbq); break;
            case 2:  tk_group_thresh<R, 2, CL>(sm, mv, (unsigned)kb, (unsigned)kq, warp, lane, wa, ta, wb, tbq); break;
            case 4:  tk_group_thresh<R, 4, CL>(sm, mv, (unsigned)kb, (unsigned)kq, warp, lane, wa, ta, wb, tbq); break;
            default: tk_group_thresh<R, 8, CL>(sm, mv, (unsigned)kb, (unsigned)kq, warp, lane, wa, ta, wb, tbq); break;
        }
        if (wa && lane == 0) sm.tb = ta;
        if constexpr (CL) {
            if (wb && lane == 0) sm.tq = tbq;
        }
        __syncthreads();                                         // also: counters visible
        T = sm.tb;
        if constexpr (CL) spec = true;
    } else {
        __syncthreads();                                         // counters visible
    }

    // ---- cluster: speculative single-exchange path -------------------------------------------
    if constexpr (CL) {
        if (spec) {
            const unsigned Tq = sm.tq;
            const unsigned sb = tk_stage<R>(sm, &sm.scount, mv, vmask, Tq, slot, lane, gpos);
            const bool sfits = (sb <= slot);

            tk_cl_wait();                                        // start-up barrier

            if (warp == 0 && lane < cs) {
                const unsigned pc = sfits ? min(sb, (unsigned)kk) : sb;
                *tk_remote(&sm.tqa[crank], lane) = Tq;
                *tk_remote(&sm.tka[crank], lane) = T;
                *tk_remote(&sm.scnt[crank], lane) = pc;
            }
            bool wrote = false;
            if (sfits && sb > 0u) {
                u64* const myrun = &sm.u.cand[(unsigned)crank * slot];
                tk_local_rank(sm, sb, (unsigned)kk, t, [&](unsigned rk, u64 key, int sub, int S) {
                    // all-gather: sub-lane s stores to blocks s, s+S, ...
                    for (int b = sub; b < cs; b += S) tk_remote(myrun, b)[rk] = key;
                    if (sub < cs) wrote = true;
                });
            }
            // barrier A: only warps that stored to other blocks' shared memory release
            {
                const bool wr = (warp == 0) || __any_sync(TK_FULL, wrote);
                if (wr) tk_cl_arrive_release();
                else    tk_cl_arrive_relaxed();
                tk_cl_wait();
            }

            // ---- check, on data identical in every block: uniform across the cluster ----
            const unsigned rc = (lane < cs) ? sm.scnt[lane] : 0u;
            bool bad = __any_sync(TK_FULL, rc > slot);
            if (!bad && kq < kk) {
                const unsigned mt = __reduce_max_sync(TK_FULL, (lane < cs) ? sm.tqa[lane] : 0u);
                const u64 th = (u64)mt << 32;
                unsigned ge = 0u;
                if (lane < cs) {
                    const u64* run = &sm.u.cand[(unsigned)lane * slot];
                    unsigned lo = 0u, hi = rc;
                    while (lo < hi) {
                        const unsigned mid = (lo + hi) >> 1;
                        if (run[mid] >= th) lo = mid + 1u; else hi = mid;
                    }
                    ge = lo;
                }
                bad = __reduce_add_sync(TK_FULL, ge) < (unsigned)kk;
            }

            if (!bad) {
                // ---- valid: rank this block's own run against the other runs, write ----
                const unsigned n0 = sm.scnt[crank];
                const int lgP = 32 - __clz(cs - 1);              // P = pow2 >= cs (cs >= 2)
                const int P = 1 << lgP;
                const unsigned per = (unsigned)TK_THREADS >> lgP;
                const int b = t & (P - 1);
                const u64* own = &sm.u.cand[(unsigned)crank * slot];
                for (unsigned i0 = 0u; i0 < n0; i0 += per) {     // block-uniform bounds
                    const unsigned i = i0 + ((unsigned)t >> lgP);
                    const bool act = i < n0;
                    const u64 x = act ? own[i] : 0ull;
                    unsigned c = 0u;
                    if (act && b < cs && b != crank) {
                        const u64* run = &sm.u.cand[(unsigned)b * slot];
                        unsigned lo = 0u, hi = sm.scnt[b];
                        while (lo < hi) {
                            const unsigned mid = (lo + hi) >> 1;
                            if (run[mid] > x) lo = mid + 1u; else hi = mid;
                        }
                        c = lo;
                    }
                    for (int off = P >> 1; off > 0; off >>= 1) c += __shfl_xor_sync(TK_FULL, c, off);
                    const unsigned rank = i + c;
                    if (act && b == 0 && rank < (unsigned)kk) {
                        out_v[rank] = tk_key_value(x);
                        out_i[rank] = tk_key_index(x);
                    }
                }
                return;
            }

            // ---- invalid: exact threshold T = min_b t_kb[b], then the exact path ----
            T = __reduce_min_sync(TK_FULL, (lane < cs) ? sm.tka[lane] : 0xFFFFFFFFu);
            // every block is done reading the speculative runs before block 0's area is reused
            cg::this_cluster().sync();
        } else {
            tk_cl_wait();                                        // start-up barrier
        }
    }

    // ---- exact path: stage this block's candidates (m >= T) ---------------------------------
    unsigned* ctr = &sm.scount;
    if constexpr (CL) { if (spec) ctr = &sm.scount2; }
    const unsigned btot = tk_stage<R>(sm, ctr, mv, vmask, T, slot, lane, gpos);
    const bool fits = (btot <= slot);

    // publish this block's run length (clamped to kk: local rank >= kk can't be in the top-k)
    if constexpr (CL) {
        if (warp == 0 && lane < cs) {
            const unsigned pc = fits ? min(btot, (unsigned)kk) : btot;
            *tk_remote(&sm.cnt[crank], lane) = pc;
        }
    }

    // ---- local exact rank of the staged candidates -----------------------------------------
    // cs == 1: the local rank is the global rank -> write the outputs directly.
    // cs  > 1: write the candidate sorted (descending) into this block's slot of block 0.
    bool wrote = false;
    if (fits && btot > 0u) {
        tk_local_rank(sm, btot, (unsigned)kk, t, [&](unsigned rk, u64 key, int sub, int S) {
            (void)S;
            if (sub == 0) {
                if constexpr (CS != 1) {
                    u64* dst = tk_remote(&sm.u.cand[(unsigned)crank * slot], 0);
                    dst[rk] = key;
                    wrote = true;
                } else {
                    out_v[rk] = tk_key_value(key);
                    out_i[rk] = tk_key_index(key);
                }
            }
        });
    }

    if constexpr (!CL) {
        if (fits) return;
    } else {
        // only warps that stored to another block's (or block 0's) shared memory release
        const bool wr = (warp == 0) || __any_sync(TK_FULL, wrote);
        if (wr) tk_cl_arrive_release();
        else    tk_cl_arrive_relaxed();
        tk_cl_wait();                                            // runs and counts in place

        const unsigned myc = (lane < cs) ? sm.cnt[lane] : 0u;
        const bool ovf = __any_sync(TK_FULL, myc > slot);       // uniform across the cluster
        if (!ovf) {
            if (crank != 0) return;
            // ---- block 0: global rank = sum over runs of #(run keys > x) ----
            unsigned cntb[NRUN];
            unsigned total = 0u, maxc = 0u;
#pragma unroll
            for (int b = 0; b < NRUN; ++b) {
                cntb[b] = (b < cs) ? sm.cnt[b] : 0u;
                total += cntb[b];
                maxc = max(maxc, cntb[b]);
            }
            const unsigned top = 1u << (31 - __clz((int)(maxc > 0u ? maxc : 1u)));
            for (unsigned i = (unsigned)t; i < total; i += TK_THREADS) {
                unsigned p = i;
                int myb = 0;
#pragma unroll
                for (int b = 0; b < NRUN - 1; ++b) {
                    if (myb == b && p >= cntb[b]) { p -= cntb[b]; myb = b + 1; }
                }
                const u64 x = sm.u.cand[(unsigned)myb * slot + p];
                unsigned pr[NRUN];
#pragma unroll
                for (int b = 0; b < NRUN; ++b) pr[b] = 0u;
                for (unsigned step = top; step > 0u; step >>= 1) {
#pragma unroll
                    for (int b = 0; b < NRUN; ++b) {
                        const unsigned np = pr[b] + step;
                        if (np <= cntb[b] && sm.u.cand[(unsigned)b * slot + np - 1u] > x) pr[b] = np;
                    }
                }
                unsigned rank = 0u;
#pragma unroll
                for (int b = 0; b < NRUN; ++b) rank += pr[b];
                if (rank < (unsigned)kk) {
                    out_v[rank] = tk_key_value(x);
                    out_i[rank] = tk_key_index(x);
                }
            }
            return;
        }
    }

    // ---- exact fallback, uniform across the cluster ----------------------------------------
    {
        u64 key[R];
#pragma unroll
        for (int r = 0; r < R; ++r)
            key[r] = ((vmask >> r) & 1u) ? tk_key(mv[r], gpos(r)) : 0ull;
        tk_radix_fallback<R, CL, NRUN>(sm, key, vmask, out_v, out_i, N, kk, cs, crank);
    }
}

// ------------------------------------------------------------------------------------------
// Kernels
// ------------------------------------------------------------------------------------------
template <int R>
__global__ void __launch_bounds__(TK_THREADS, 1)
tk_single_kernel(const float* __restrict__ input, float* __restrict__ out_v,
                 int* __restrict__ out_i, int N, int kk, int kb, int nb, int kq)
{
    __shared__ TkSmem sm;
    tk_body<R, 1, 1>(sm, input, out_v, out_i, N, kk, kb, nb, kq);
}

// runtime cluster size (<= CMAX), launched with cudaLaunchKernelEx
template <int R, int CMAX>
__global__ void __launch_bounds__(TK_THREADS, 1)
tk_cluster_kernel(const float* __restrict__ input, float* __restrict__ out_v,
                  int* __restrict__ out_i, int N, int kk, int kb, int nb, int kq)
{
    __shared__ TkSmem sm;
    tk_body<R, 0, CMAX>(sm, input, out_v, out_i, N, kk, kb, nb, kq);
}

__global__ void __launch_bounds__(TK_THREADS, 1) __cluster_dims__(4, 1, 1)
tk_c4r1_kernel(const float* __restrict__ input, float* __restrict__ out_v,
               int* __restrict__ out_i, int N, int kk, int kb, int nb, int kq)
{
    __shared__ TkSmem sm;
    tk_body<1, 4, 4>(sm, input, out_v, out_i, N, kk, kb, nb, kq);
}

__global__ void __launch_bounds__(TK_THREADS, 1) __cluster_dims__(4, 1, 1)
tk_c4r4_kernel(const float* __restrict__ input, float* __restrict__ out_v,
               int* __restrict__ out_i, int N, int kk, int kb, int nb, int kq)
{
    __shared__ TkSmem sm;
    tk_body<4, 4, 4>(sm, input, out_v, out_i, N, kk, kb, nb, kq);
}

__global__ void __launch_bounds__(TK_THREADS, 1) __cluster_dims__(8, 1, 1)
tk_c8r4_kernel(const float* __restrict__ input, float* __restrict__ out_v,
               int* __restrict__ out_i, int N, int kk, int kb, int nb, int kq)
{
    __shared__ TkSmem sm;
    tk_body<4, 8, 8>(sm, input, out_v, out_i, N, kk, kb, nb, kq);
}

__global__ void __launch_bounds__(TK_THREADS, 1) __cluster_dims__(8, 1, 1)
tk_c8r8_kernel(const float* __restrict__ input, float* __restrict__ out_v,
               int* __restrict__ out_i, int N, int kk, int kb, int nb, int kq)
{
    __shared__ TkSmem sm;
    tk_body<8, 8, 8>(sm, input, out_v, out_i, N, kk, kb, nb, kq);
}

// 16-block non-portable cluster: compile-time CS, cluster dims given at launch
__global__ void __launch_bounds__(TK_THREADS, 1)
tk_c16r4_kernel(const float* __restrict__ input, float* __restrict__ out_v,
                int* __restrict__ out_i, int N, int kk, int kb, int nb, int kq)
{
    __shared__ TkSmem sm;
    tk_body<4, 16, 16>(sm, input, out_v, out_i, N, kk, kb, nb, kq);
}

// ------------------------------------------------------------------------------------------
// Fallback: CUB device radix sort of the keys (any N, any k)
// ------------------------------------------------------------------------------------------
__global__ void tk_make_keys_kernel(const float* __restrict__ input, u64* __restrict__ keys, int N) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        keys[i] = tk_key(tk_ord(input[i]), i);
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
// Launch helpers
// ------------------------------------------------------------------------------------------
static void tk_make_cfg(cudaLaunchConfig_t& cfg, cudaLaunchAttribute* attr, int cs) {
    memset(&cfg, 0, sizeof(cfg));
    memset(attr, 0, sizeof(cudaLaunchAttribute));
    cfg.gridDim = dim3((unsigned)cs, 1, 1);
    cfg.blockDim = dim3(TK_THREADS, 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = 0;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cs;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
}

// cluster of cs blocks; cs == grid size
template <typename K>
static cudaError_t tk_launch_cluster(K kern, int cs, const float* input, float* out_v, int* out_i,
                                     int N, int kk, int kb, int nb, int kq) {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    tk_make_cfg(cfg, attr, cs);
    return cudaLaunchKernelEx(&cfg, kern, input, out_v, out_i, N, kk, kb, nb, kq);
}

// Once: can 16-block clusters of the two 16-capable kernels be scheduled?
static int g_tk_c16_state = 0;   // 0 unknown, 1 usable, -1 not usable
static bool tk_c16_ok() {
    if (g_tk_c16_state == 0) {
        g_tk_c16_state = -1;
        const void* f1 = reinterpret_cast<const void*>(&tk_c16r4_kernel);
        const void* f2 = reinterpret_cast<const void*>(&tk_cluster_kernel<4, 16>);
        if (cudaFuncSetAttribute(f1, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
            cudaFuncSetAttribute(f2, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) {
            cudaLaunchConfig_t cfg;
            cudaLaunchAttribute attr[1];
            tk_make_cfg(cfg, attr, 16);
            int n1 = 0, n2 = 0;
            if (cudaOccupancyMaxActiveClusters(&n1, f1, &cfg) == cudaSuccess && n1 > 0 &&
                cudaOccupancyMaxActiveClusters(&n2, f2, &cfg) == cudaSuccess && n2 > 0)
                g_tk_c16_state = 1;
        }
        (void)cudaGetLastError();
    }
    return g_tk_c16_state > 0;
}

// Launch the fast path for the given shape split (R elements per thread, cs blocks).
static cudaError_t tk_launch_fast(const float* input, float* out_v, int* out_i,
                                  int N, int kk, int R, int cs) {
    const int kb = (kk + cs - 1) / cs;

    // speculative per-block quota (clusters): kq = kb + 4*ceil(sqrt(kb)) + 4, <= kk, <= 256
    int kq = kb;
    if (cs > 1) {
        int s = 1;
        while (s * s < kb) ++s;
        kq = kb + 4 * s + 4;
        if (kq > kk) kq = kk;
        if (kq > 256) kq = 256;
        if (kq < kb) kq = kb;
    }

    // group maxima count B per block: ~2*kb for one block (both steps are serial
    // all-pairs), ~4*kq for a cluster; 32 <= B <= 256.
    // nb = B/32 maxima per warp; 0 = no threshold (N <= 256, or a quota > B).
    int nb = 0;
    if (!(cs == 1 && N <= 256)) {
        const int target = (cs == 1) ? 2 * kb : 4 * kq;
        int B = 32;
        while (B < target && B < 256) B <<= 1;
        if (kb <= B && kq <= B) nb = B / 32;
    }

    if (cs == 1) {
        if (R == 1)
            tk_single_kernel<1><<<1, TK_THREADS>>>(input, out_v, out_i, N, kk, kb, nb, kq);
        else if (R == 2)
            tk_single_kernel<2><<<1, TK_THREADS>>>(input, out_v, out_i, N, kk, kb, nb, kq);
        else
            tk_single_kernel<4><<<1, TK_THREADS>>>(input, out_v, out_i, N, kk, kb, nb, kq);
        return cudaGetLastError();
    }
    if (R == 1) {
        if (cs == 4) {
            tk_c4r1_kernel<<<4, TK_THREADS>>>(input, out_v, out_i, N, kk, kb, nb, kq);
            return cudaGetLastError();
        }
        return tk_launch_cluster(tk_cluster_kernel<1, 8>, cs, input, out_v, out_i, N, kk, kb, nb, kq);
    }
#if TK_MID_SHAPE == 1
    if (R == 2)
        return tk_launch_cluster(tk_cluster_kernel<2, 8>, cs, input, out_v, out_i, N, kk, kb, nb, kq);
#endif
    if (R == 4) {
        if (cs > 8) {
            if (cs == 16)
                return tk_launch_cluster(tk_c16r4_kernel, 16, input, out_v, out_i, N, kk, kb, nb, kq);
            return tk_launch_cluster(tk_cluster_kernel<4, 16>, cs, input, out_v, out_i, N, kk, kb, nb, kq);
        }
        if (cs == 4) {
            tk_c4r4_kernel<<<4, TK_THREADS>>>(input, out_v, out_i, N, kk, kb, nb, kq);
            return cudaGetLastError();
        }
        if (cs == 8) {
            tk_c8r4_kernel<<<8, TK_THREADS>>>(input, out_v, out_i, N, kk, kb, nb, kq);
            return cudaGetLastError();
        }
        return tk_launch_cluster(tk_cluster_kernel<4, 8>, cs, input, out_v, out_i, N, kk, kb, nb, kq);
    }
    // R == 8
    if (cs == 8) {
        tk_c8r8_kernel<<<8, TK_THREADS>>>(input, out_v, out_i, N, kk, kb, nb, kq);
        return cudaGetLastError();
    }
    return tk_launch_cluster(tk_cluster_kernel<8, 8>, cs, input, out_v, out_i, N, kk, kb, nb, kq);
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
            int R, cs;
            if (N <= 1024) {
                R = 1; cs = 1;
            } else if (N <= 4096) {
                R = (N <= 2048) ? 2 : 4; cs = 1;
                if (kk >= 64) {
                    // cluster of ceil(N/1024) blocks x R=1 (last block at least half full,
                    // so its group maxima keep the threshold tight)
                    const int c1 = (N + 1023) / 1024;
                    const int rem = N - (c1 - 1) * 1024;
                    if (rem >= 512) { R = 1; cs = c1; }
                }
            } else if (N <= 32768) {
                R = 4; cs = (N + 4095) / 4096;
#if TK_MID_SHAPE == 1
                if (N <= 16384) { R = 2; cs = (N + 2047) / 2048; }
#endif
            } else {
                R = 8; cs = (N + 8191) / 8192;
#if TK_USE_C16
                if (kk <= 256 && tk_c16_ok()) { R = 4; cs = (N + 4095) / 4096; }
#endif
            }

            cudaError_t err = tk_launch_fast(input, top_k_values, top_k_indices, N, kk, R, cs);
            if (err != cudaSuccess && R == 4 && cs > 8) {
                // 16-capable cluster failed to launch: use the portable cs <= 8, R = 8 kernels
                (void)cudaGetLastError();
                R = 8; cs = (N + 8191) / 8192;
                err = tk_launch_fast(input, top_k_values, top_k_indices, N, kk, R, cs);
            }
            if (err == cudaSuccess) done = true;
            else (void)cudaGetLastError();
        }
        if (!done) tk_fallback(input, top_k_values, top_k_indices, N, kk);
    }
    cudaDeviceSynchronize();
}
