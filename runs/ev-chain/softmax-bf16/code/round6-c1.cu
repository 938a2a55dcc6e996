// Row-parallel BF16 softmax for sm_90a (round 6).
//
//  * C % 8 == 0 and 16-byte aligned pointers:
//      - C in (8192, 16384] and R = ceil(N*K/128) in {2,4,8} (K = SOFTMAX_ROWS_K, default 8):
//                                 row-staggered cluster kernel. A cluster of K CTAs owns R
//                                 consecutive rows; each CTA owns the 1/K slice of each of them
//                                 (one 16 B chunk per thread per row). All R loads are issued
//                                 up front in row order; row j is then reduced, exchanged
//                                 (st.async + its own mbarrier), scaled and stored while later
//                                 rows are still arriving, so only the last piece's tail is
//                                 exposed.
//      - N <= 64 and C >= 16384 : the row is split across a thread-block cluster of k CTAs
//                                 (k = 8/4/2), flat one-level st.async exchange.
//      - C <= 1024              : one warp per row, row kept in registers.
//      - C <= 32768             : one CTA per row, row kept in registers.
//      - larger C               : vectorized two-pass kernel.
//  * anything else (C % 8 != 0, misaligned pointers): coalesced scalar two-pass kernel.
//
// All vectorized input loads are L2 evict-first (cache policy), L1 no-allocate.
//
// Output-side first touch: right after a CTA has issued its input loads, one thread issues
// prefetch.global.L2 on the first line of the CTA's output range (and on the last line if it
// lies in another 64 KB region).
//
// Per-chunk register paths (round 5):
//     r_k = m_k*log2e,  e = ex2(fma(x, log2e, -r_k)),  s_k = sum(e)
//     R_w = max r_k, f_k = ex2(r_k - R_w), S_w = sum s_k f_k; higher levels combine (R, S).
// Early-max paths (row-staggered kernel; optionally the warp/block kernels):
//     the warp max is taken on the raw bf16 (hmax2 + redux) before any exp, so each element
//     costs exactly one ex2 relative to the warp max, and there is no per-chunk f rescale.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#ifndef SOFTMAX_L2_EVICT_FIRST
#define SOFTMAX_L2_EVICT_FIRST 1  // evict-first L2 policy on input loads
#endif
#ifndef SOFTMAX_L2_256B
#define SOFTMAX_L2_256B 0  // add .L2::256B prefetch-size qualifier to input loads
#endif
#ifndef SOFTMAX_CLUSTER_BIG_SMEM
#define SOFTMAX_CLUSTER_BIG_SMEM 0  // 1: request 120 KB dynamic smem for cluster CTAs
#endif
#ifndef SOFTMAX_C16K_BS1024
#define SOFTMAX_C16K_BS1024 1  // 1: C in (8192,16384] uses 1024 x V=2; 0: 512 x V=4
#endif
#ifndef SOFTMAX_INT_PACK
#define SOFTMAX_INT_PACK 0  // 1: integer RNE bf16x2 packing in the register paths' stores
#endif
#ifndef SOFTMAX_OUT_PREFETCH
#define SOFTMAX_OUT_PREFETCH 1  // 1: per-CTA L2 prefetch of the output range's first/last line
#endif
#ifndef SOFTMAX_CLUSTER_FLAT
#define SOFTMAX_CLUSTER_FLAT 1  // 1: one-level warp-partial exchange; 0: block combine + exchange
#endif
#ifndef SOFTMAX_CLUSTER_PROBE_NO_EXCHANGE
// TIMING PROBE ONLY. 1: the cluster kernel skips the cross-CTA exchange and normalises with
// its local partials. The OUTPUT IS WRONG. Never ship with this set.
#define SOFTMAX_CLUSTER_PROBE_NO_EXCHANGE 0
#endif
// ---- round 6 knobs ----
#ifndef SOFTMAX_ROWS
#define SOFTMAX_ROWS 1  // 1: row-staggered cluster kernel for C in (8192,16384]; 0: round-5 dispatch
#endif
#ifndef SOFTMAX_ROWS_K
#define SOFTMAX_ROWS_K 8  // CTAs per cluster in the row-staggered kernel: 8, 4 or 2
#endif
#ifndef SOFTMAX_ROWS_TARGET_CTAS
#define SOFTMAX_ROWS_TARGET_CTAS 128  // R = ceil(N*K / this)
#endif
#ifndef SOFTMAX_ROWS_MIN_R
#define SOFTMAX_ROWS_MIN_R 2  // smaller R keeps the round-5 dispatch (N <= 16 for K = 8)
#endif
#ifndef SOFTMAX_ROWS_SMALLN
#define SOFTMAX_ROWS_SMALLN 1  // 0: N <= 64 stays on the round-5 paths (A/B for cases 7, 11)
#endif
#ifndef SOFTMAX_ROWS_BIG_SMEM
#define SOFTMAX_ROWS_BIG_SMEM 0  // 1: 120 KB dynamic smem per row-staggered CTA (1 CTA / SM)
#endif
#ifndef SOFTMAX_EARLY_MAX
#define SOFTMAX_EARLY_MAX 0  // 1: warp/block register kernels use the early-max, one-ex2 form
#endif

namespace {

constexpr uint32_t kNegInfBF2 = 0xFF80FF80u;  // two bf16 -inf values
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxCluster = 8;
constexpr int kClusterSmemBytes = 120 * 1024;  // > half an SM: one cluster CTA per SM

// ---------------------------------------------------------------------------------------
// Input loads
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t make_load_policy() {
#if SOFTMAX_L2_EVICT_FIRST
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
#else
    return 0ull;
#endif
}

__device__ __forceinline__ uint4 ld_in_v4(const uint4* p, uint64_t pol) {
    uint4 r;
#if SOFTMAX_L2_EVICT_FIRST
#if SOFTMAX_L2_256B
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(pol));
#else
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(pol));
#endif
#else
    (void)pol;
#if SOFTMAX_L2_256B
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
#else
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
#endif
#endif
    return r;
}

// Same load, but volatile: NVVM keeps it in program order with the other volatile asm
// (mbarrier waits, st.async), so the later rows' loads of the row-staggered kernel cannot
// be sunk past the first row's exchange wait.
__device__ __forceinline__ uint4 ld_in_v4_ordered(const uint4* p, uint64_t pol) {
    uint4 r;
#if SOFTMAX_L2_EVICT_FIRST
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p), "l"(pol));
#else
    (void)pol;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
#endif
    return r;
}

// ---------------------------------------------------------------------------------------
// Output-range L2 prefetch. Issues a prefetch on the line holding the first byte of
// [base, base + bytes), and a second one on the line holding the last byte if that lies in
// a different 64 KB region.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ void prefetch_out_range(const void* base, size_t bytes) {
#if SOFTMAX_OUT_PREFETCH
    if (bytes == 0) return;
    const uintptr_t a = reinterpret_cast<uintptr_t>(base);
    const uintptr_t b = a + bytes - 1;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
    if ((a >> 16) != (b >> 16)) asm volatile("prefetch.global.L2 [%0];" ::"l"(b));
#else
    (void)base;
    (void)bytes;
#endif
}

__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x = lo (low half), .y = hi
    return *reinterpret_cast<uint32_t*>(&h);
}

// Round-to-nearest-even bf16x2 packing on the integer ALU (finite values only).
__device__ __forceinline__ uint32_t pack_bf2_int(float lo, float hi) {
    uint32_t a = __float_as_uint(lo);
    uint32_t b = __float_as_uint(hi);
    a += 0x7fffu + ((a >> 16) & 1u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return __byte_perm(a, b, 0x7632);  // low half = a[31:16], high half = b[31:16]
}

__device__ __forceinline__ uint32_t pack_out(float lo, float hi) {
#if SOFTMAX_INT_PACK
    return pack_bf2_int(lo, hi);
#else
    return pack_bf2(lo, hi);
#endif
}

__device__ __forceinline__ __nv_bfloat162 as_bf2(uint32_t w) {
    __nv_bfloat162 h;
    *reinterpret_cast<uint32_t*>(&h) = w;
    return h;
}

__device__ __forceinline__ uint32_t bf2_as_u32(__nv_bfloat162 h) {
    return *reinterpret_cast<uint32_t*>(&h);
}

__device__ __forceinline__ float fast_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// A max of -inf means "no finite contribution". Use 0 instead so that we never form
// (-inf) - (-inf) = NaN.
__device__ __forceinline__ float safe_max(float m) { return (m == -INFINITY) ? 0.0f : m; }

// ---------------------------------------------------------------------------------------
// Warp primitives for the register-resident paths
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ int f2key(float f) {
    const int b = __float_as_int(f);
    return b ^ ((b >> 31) & 0x7fffffff);
}
__device__ __forceinline__ float key2f(int k) {
    return __int_as_float(k ^ ((k >> 31) & 0x7fffffff));
}
// Every lane gets the max.
__device__ __forceinline__ float warp_max_f(float v) {
    return key2f(__reduce_max_sync(0xffffffffu, f2key(v)));
}
// XOR butterfly: every lane gets a bit-identical sum.
__device__ __forceinline__ float warp_sum_f(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// One 8-element chunk (4 packed bf16x2 words). Returns the chunk's raw log2-max r
// (-inf for an all -inf chunk), the 8 values e = 2^(x*log2e - r) and their sum s.
__device__ __forceinline__ void chunk_exp(const uint32_t (&w)[4], float (&e)[8], float& r,
                                          float& s) {
    const __nv_bfloat162 m01 = __hmax2(as_bf2(w[0]), as_bf2(w[1]));
    const __nv_bfloat162 m23 = __hmax2(as_bf2(w[2]), as_bf2(w[3]));
    const uint32_t mw = bf2_as_u32(__hmax2(m01, m23));
    const float m = fmaxf(bf_lo(mw), bf_hi(mw));
    r = m * kLog2e;
    const float nrs = (r == -INFINITY) ? 0.0f : -r;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        e[2 * j] = fast_ex2(fmaf(bf_lo(w[j]), kLog2e, nrs));
        e[2 * j + 1] = fast_ex2(fmaf(bf_hi(w[j]), kLog2e, nrs));
    }
    s = ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
}

// Issue all V 16-byte loads up front (padding is -inf).
template <int V, int STRIDE>
__device__ __forceinline__ void load_raw(const uint4* __restrict__ x, int t, int cnt,
                                         uint32_t (&d)[V][4]) {
    const uint64_t pol = make_load_policy();
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int i = t + k * STRIDE;
        uint4 v = make_uint4(kNegInfBF2, kNegInfBF2, kNegInfBF2, kNegInfBF2);
        if (i < cnt) v = ld_in_v4(x + i, pol);
        d[k][0] = v.x;
        d[k][1] = v.y;
        d[k][2] = v.z;
        d[k][3] = v.w;
    }
}

// Turn each loaded chunk into exps.
template <int V>
__device__ __forceinline__ void exp_chunks(const uint32_t (&d)[V][4], float (&e)[V][8],
                                           float (&r)[V], float (&s)[V]) {
#pragma unroll
    for (int k = 0; k < V; ++k) chunk_exp(d[k], e[k], r[k], s[k]);
}

// Warp-level (R, S) from the per-chunk partials. R is the raw log2 max and
// S = sum 2^(x*log2e - safe(R)). Every lane gets the result.
template <int V>
__device__ __forceinline__ void warp_partial(const float (&r)[V], const float (&s)[V],
                                             float (&f)[V], float& R, float& S) {
    float t = r[0];
#pragma unroll
    for (int k = 1; k < V; ++k) t = fmaxf(t, r[k]);
    R = warp_max_f(t);
    const float Rs = safe_max(R);
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        f[k] = fast_ex2(r[k] - Rs);
        acc = fmaf(s[k], f[k], acc);
    }
    S = warp_sum_f(acc);
}

// Early-max warp partial: the warp max is taken on the raw bf16 values (hmax2 tree + redux)
// BEFORE any exp, so each element needs exactly one ex2, relative to the warp max.
// Outputs: R = raw log2 warp max (-inf if the warp holds no finite value), e = 2^(x*log2e -
// safe(R)) (0 for padding), S = sum e over the warp. Every lane gets identical R and S.
template <int V>
__device__ __forceinline__ void warp_exp_early(const uint32_t (&d)[V][4], float (&e)[V][8],
                                               float& R, float& S) {
    __nv_bfloat162 mx = __hmax2(__hmax2(as_bf2(d[0][0]), as_bf2(d[0][1])),
                                __hmax2(as_bf2(d[0][2]), as_bf2(d[0][3])));
#pragma unroll
    for (int k = 1; k < V; ++k) {
        const __nv_bfloat162 mk = __hmax2(__hmax2(as_bf2(d[k][0]), as_bf2(d[k][1])),
                                          __hmax2(as_bf2(d[k][2]), as_bf2(d[k][3])));
        mx = __hmax2(mx, mk);
    }
    const uint32_t mw = bf2_as_u32(mx);
    const float m = warp_max_f(fmaxf(bf_lo(mw), bf_hi(mw)));
    R = m * kLog2e;
    const float nrs = (R == -INFINITY) ? 0.0f : -R;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < V; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            e[k][2 * j] = fast_ex2(fmaf(bf_lo(d[k][j]), kLog2e, nrs));
            e[k][2 * j + 1] = fast_ex2(fmaf(bf_hi(d[k][j]), kLog2e, nrs));
        }
        acc += ((e[k][0] + e[k][1]) + (e[k][2] + e[k][3])) +
               ((e[k][4] + e[k][5]) + (e[k][6] + e[k][7]));
    }
    S = warp_sum_f(acc);
}

// Warp -> final rescale factor. A warp with no finite value (Rw = -inf) has all e = 0;
// G = 0 then keeps every product finite.
__device__ __forceinline__ float warp_to_final(float Rw, float Rfs) {
    return (Rw == -INFINITY) ? 0.0f : fast_ex2(Rw - Rfs);
}

// Combine the warp partials of a CTA (one barrier). NW must be a power of two, <= 32.
template <int NW>
__device__ __forceinline__ void block_combine(float Rw, float Sw, float2* red, int lane, int wid,
                                              float& Rb, float& Sb, float& G) {
    if (lane == 0) red[wid] = make_float2(Rw, Sw);
    __syncthreads();
    const float2 p = red[lane & (NW - 1)];  // each group of NW lanes holds all warps
    Rb = warp_max_f(p.x);
    const float Rbs = safe_max(Rb);
    G = warp_to_final(Rw, Rbs);
    float s = p.y * fast_ex2(p.x - Rbs);
#pragma unroll
    for (int off = NW / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    Sb = s;
}

__device__ __forceinline__ uint4 make_out_e(const float (&e)[8], float sc) {
    uint4 o;
    o.x = pack_out(e[0] * sc, e[1] * sc);
    o.y = pack_out(e[2] * sc, e[3] * sc);
    o.z = pack_out(e[4] * sc, e[5] * sc);
    o.w = pack_out(e[6] * sc, e[7] * sc);
    return o;
}

// out = e * (f_k * scale), scale = G * inv.
template <int V, int STRIDE>
__device__ __forceinline__ void scale_store(uint4* __restrict__ y, int t, int cnt,
                                            const float (&e)[V][8], const float (&f)[V],
                                            float scale) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int i = t + k * STRIDE;
        if (i < cnt) {
            const float sc = f[k] * scale;
            y[i] = make_out_e(e[k], sc);
        }
    }
}

// out = e * scale (early-max form: no per-chunk factor).
template <int V, int STRIDE>
__device__ __forceinline__ void scale_store_nof(uint4* __restrict__ y, int t, int cnt,
                                                const float (&e)[V][8], float scale) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int i = t + k * STRIDE;
        if (i < cnt) y[i] = make_out_e(e[k], scale);
    }
}

// ---------------------------------------------------------------------------------------
// One warp per row, row in registers. Requires C % 8 == 0, 16B-aligned pointers,
// C/8 <= 32*V.
// ---------------------------------------------------------------------------------------
template <int V, int WPB>
__global__ void __launch_bounds__(WPB * 32)
    softmax_warp_reg(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                     int C) {
    const int lane = threadIdx.x & 31;
    const int base = blockIdx.x * WPB;
    const int row = base + (threadIdx.x >> 5);
    if (row >= N) return;  // warp-uniform (warp 0 always has a valid row)
    const int nvec = C >> 3;
    const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
    uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec;

    uint32_t d[V][4];
    load_raw<V, 32>(x, lane, nvec, d);
    if (threadIdx.x == 0) {
        const int last = min(N, base + WPB);
        prefetch_out_range(out + (size_t)base * C,
                           (size_t)(last - base) * (size_t)C * sizeof(__nv_bfloat16));
    }
#if SOFTMAX_EARLY_MAX
    float e[V][8];
    float R, S;
    warp_exp_early<V>(d, e, R, S);
    (void)R;
    scale_store_nof<V, 32>(y, lane, nvec, e, 1.0f / S);
#else
    float e[V][8], r[V], s[V], f[V];
    exp_chunks<V>(d, e, r, s);
    float R, S;
    warp_partial<V>(r, s, f, R, S);
    scale_store<V, 32>(y, lane, nvec, e, f, 1.0f / S);  // warp max is the final max: G = 1
#endif
}

// ---------------------------------------------------------------------------------------
// One CTA per row, row in registers. Requires C % 8 == 0, 16B-aligned pointers,
// C/8 <= BS*V. Grid = N.
// ---------------------------------------------------------------------------------------
template <int BS, int V>
__global__ void __launch_bounds__(BS)
    softmax_block_reg(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                      int C) {
    constexpr int NW = BS / 32;
    __shared__ float2 red[NW];
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int wid = tid >> 5;
    const int row = blockIdx.x;
    const int nvec = C >> 3;
    const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
    uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec;

    uint32_t d[V][4];
    load_raw<V, BS>(x, tid, nvec, d);
    if (tid == 0) prefetch_out_range(y, (size_t)nvec * sizeof(uint4));
#if SOFTMAX_EARLY_MAX
    float e[V][8];
    float Rw, Sw;
    warp_exp_early<V>(d, e, Rw, Sw);
    float Rb, Sb, G;
    block_combine<NW>(Rw, Sw, red, lane, wid, Rb, Sb, G);
    scale_store_nof<V, BS>(y, tid, nvec, e, G * (1.0f / Sb));
#else
    float e[V][8], r[V], s[V], f[V];
    exp_chunks<V>(d, e, r, s);
    float Rw, Sw;
    warp_partial<V>(r, s, f, Rw, Sw);
    float Rb, Sb, G;
    block_combine<NW>(Rw, Sw, red, lane, wid, Rb, Sb, G);
    scale_store<V, BS>(y, tid, nvec, e, f, G * (1.0f / Sb));
#endif
}

// ---------------------------------------------------------------------------------------
// Cluster / mbarrier helpers (sm_90)
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_ctarank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t cluster_nctarank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t cluster_id_x() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {  // acquire semantics (default)
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ uint32_t map_rank(uint32_t local_addr, uint32_t rank) {
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(local_addr), "r"(rank));
    return ra;
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_wait_parity(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n\t"
            ".reg .pred p;\n\t"
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t"
            "}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}
// One-way push of (a, b) into CTA `rank`'s copy of `slot`, completing 8 bytes of
// transaction on that CTA's copy of `bar`.
__device__ __forceinline__ void st_async_f2(uint32_t slot, uint32_t bar, uint32_t rank, float a,
                                            float b) {
    const uint32_t rs = map_rank(slot, rank);
    const uint32_t rb = map_rank(bar, rank);
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(
            rs),
        "r"(__float_as_uint(a)), "r"(__float_as_uint(b)), "r"(rb)
        : "memory");
}

// ---------------------------------------------------------------------------------------
// One cluster of k CTAs per row (k from the launch attribute, 2..8). Round-5 kernel.
// ---------------------------------------------------------------------------------------
template <int BS, int V>
__global__ void __launch_bounds__(BS, 1)
    softmax_cluster(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                    int C) {
    constexpr int NW = BS / 32;
#if SOFTMAX_CLUSTER_FLAT
    constexpr int NSLOT = kMaxCluster * NW;          // <= 8 * 16 = 128 pairs (1 KB)
    constexpr int MAXP = (NSLOT + 31) / 32;          // pairs per lane in the final reduce
    constexpr int MSG_PER_PEER = NW;                 // messages each peer sends to us
    __shared__ __align__(16) float2 cred[NSLOT];
#else
    constexpr int MSG_PER_PEER = 1;
    __shared__ float2 red[NW];
    __shared__ __align__(16) float2 cred[kMaxCluster];
#endif
    __shared__ __align__(8) uint64_t cbar;

    const int tid = threadIdx.x;
    const int k = (int)cluster_nctarank();
    const uint32_t bar = smem_u32(&cbar);

    if (tid == 0) {
        mbar_init(bar, 1u);
        mbar_arrive_expect_tx(bar, (uint32_t)(k * MSG_PER_PEER * (int)sizeof(float2)));
        fence_mbarrier_init();
    }
    cluster_arrive_relaxed();

    const int lane = tid & 31;
    const int wid = tid >> 5;
    const int rank = (int)cluster_ctarank();
    const int row = (int)cluster_id_x();
    const int nvec = C >> 3;
    const int per = (nvec + k - 1) / k;
    const int start = rank * per;
    const int cnt = min(per, nvec - start);  // may be <= 0: empty slice, still participates

    const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec + start;
    uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec + start;

    uint32_t d[V][4];
    load_raw<V, BS>(x, tid, cnt, d);
    if (tid == 0 && cnt > 0) prefetch_out_range(y, (size_t)cnt * sizeof(uint4));
    float e[V][8], r[V], s[V], f[V];
    exp_chunks<V>(d, e, r, s);
    float Rw, Sw;
    warp_partial<V>(r, s, f, Rw, Sw);

#if SOFTMAX_CLUSTER_PROBE_NO_EXCHANGE
    (void)bar;
    (void)MSG_PER_PEER;
    cluster_wait();
    scale_store<V, BS>(y, tid, cnt, e, f, 1.0f / Sw);
#elif SOFTMAX_CLUSTER_FLAT
    cluster_wait();  // all CTAs of the cluster are running, their mbarriers initialised
    if (lane < k) st_async_f2(smem_u32(&cred[rank * NW + wid]), bar, (uint32_t)lane, Rw, Sw);
    mbar_wait_parity(bar, 0u);  // all k*NW partials have landed in our cred[]

    const int total = k * NW;
    float px[MAXP], py[MAXP];
    float m = -INFINITY;
#pragma unroll
    for (int q = 0; q < MAXP; ++q) {
        const int j = lane + 32 * q;
        px[q] = -INFINITY;
        py[q] = 0.0f;
        if (j < total) {
            const float2 c = cred[j];
            px[q] = c.x;
            py[q] = c.y;
        }
        m = fmaxf(m, px[q]);
    }
    const float Rc = warp_max_f(m);
    const float Rcs = safe_max(Rc);
    const float G = warp_to_final(Rw, Rcs);
    float sacc = 0.0f;
#pragma unroll
    for (int q = 0; q < MAXP; ++q) sacc = fmaf(py[q], fast_ex2(px[q] - Rcs), sacc);
    const float Sc = warp_sum_f(sacc);
    scale_store<V, BS>(y, tid, cnt, e, f, G * (1.0f / Sc));
#else
    float Rb, Sb, Gb;
    block_combine<NW>(Rw, Sw, red, lane, wid, Rb, Sb, Gb);
    (void)Gb;

    cluster_wait();
    if (tid < k) st_async_f2(smem_u32(&cred[rank]), bar, (uint32_t)tid, Rb, Sb);
    mbar_wait_parity(bar, 0u);

    float Rc = -INFINITY;
    for (int j = 0; j < k; ++j) Rc = fmaxf(Rc, cred[j].x);
    const float Rcs = safe_max(Rc);
    const float G = warp_to_final(Rw, Rcs);
    float Sc = 0.0f;
    for (int j = 0; j < k; ++j) {
        const float2 c = cred[j];
        Sc = fmaf(c.y, fast_ex2(c.x - Rcs), Sc);
    }
    scale_store<V, BS>(y, tid, cnt, e, f, G * (1.0f / Sc));
#endif
}

// ---------------------------------------------------------------------------------------
// Row-staggered cluster kernel (round 6).
//
// Cluster c (K CTAs, cluster dims = K, a compile-time constant that MUST match the launch
// attribute) owns rows [c*R, c*R + R) ∩ [0, N). CTA `rank` owns the contiguous slice
// [rank*per, rank*per + per) of the uint4 chunks of each of those rows, per = ceil(nvec/K)
// <= BS: every thread holds exactly one 16 B chunk per row (padding = -inf).
//
// Entry: mbarrier j (j < R) is initialised by thread j, expecting K*NW*8 bytes (one 8-byte
// (R, S) message from every warp of every CTA of the cluster), then one relaxed cluster
// arrive. All R loads are issued in row order (volatile asm: kept ahead of the first wait).
//
// Row j, in order: hmax2 + redux warp max on the raw bf16, one ex2 per element; lanes
// 0..K-1 of each warp push (R_w, S_w) to peer `lane`'s cred[j][rank*NW + wid] with
// st.async completing on the peer's bar[j]; wait bar[j] (parity 0, used once); every warp
// reduces the K*NW pairs itself; scale and store row j. The single cluster wait (all peers
// started, their mbarriers initialised) sits before row 0's first push.
//
// Rows >= N: skipped by all CTAs of the cluster alike (row validity is cluster-uniform), so
// nobody pushes to or waits on their barriers. Empty slices and all-padding warps still push
// (-inf, 0). Every CTA waits on every barrier that receives messages, so no CTA exits while
// messages to it are in flight, and no CTA reads remote shared memory: no trailing barrier.
// ---------------------------------------------------------------------------------------
template <int BS, int K, int R>
__global__ void __launch_bounds__(BS, 1)
    softmax_cluster_rows(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                         int N, int C) {
    constexpr int NW = BS / 32;
    constexpr int NSLOT = K * NW;            // (R, S) pairs received per row
    constexpr int MAXP = (NSLOT + 31) / 32;  // pairs per lane in the final reduce
    static_assert(K >= 1 && K <= kMaxCluster, "cluster size");
    static_assert(R >= 1 && R <= 32, "rows per cluster");
    __shared__ __align__(16) float2 cred[R][NSLOT];
    __shared__ __align__(8) uint64_t cbar[R];

    const int tid = threadIdx.x;
    if (tid < R) {
        const uint32_t b = smem_u32(&cbar[tid]);
        mbar_init(b, 1u);
        mbar_arrive_expect_tx(b, (uint32_t)(NSLOT * (int)sizeof(float2)));
        fence_mbarrier_init();
    }
    // Non-blocking arrive; the matching wait precedes the first DSMEM push.
    cluster_arrive_relaxed();

    const int lane = tid & 31;
    const int wid = tid >> 5;
    const int rank = (int)cluster_ctarank();
    const int row0 = (int)cluster_id_x() * R;  // < N by construction of the grid
    const int nvec = C >> 3;
    const int per = (nvec + K - 1) / K;
    const int start = rank * per;
    const int cnt = min(per, nvec - start);  // may be <= 0: empty slice, still participates
    const bool has = tid < cnt;
    const int nrows = min(R, N - row0);  // >= 1

    const size_t off = (size_t)row0 * (size_t)nvec + (size_t)start + (size_t)tid;
    const uint4* x = reinterpret_cast<const uint4*>(in) + off;
    uint4* y = reinterpret_cast<uint4*>(out) + off;

    // All loads up front, row 0 first.
    const uint64_t pol = make_load_policy();
    uint32_t d[R][4];
#pragma unroll
    for (int j = 0; j < R; ++j) {
        uint4 v = make_uint4(kNegInfBF2, kNegInfBF2, kNegInfBF2, kNegInfBF2);
        if (has && j < nrows) v = ld_in_v4_ordered(x + (size_t)j * (size_t)nvec, pol);
        d[j][0] = v.x;
        d[j][1] = v.y;
        d[j][2] = v.z;
        d[j][3] = v.w;
    }
    // One thread per row: L2 prefetch of this CTA's output slice of that row.
    if (tid < nrows && cnt > 0)
        prefetch_out_range(reinterpret_cast<const uint4*>(out) +
                               (size_t)(row0 + tid) * (size_t)nvec + (size_t)start,
                           (size_t)cnt * sizeof(uint4));

#pragma unroll
    for (int j = 0; j < R; ++j) {
        if (j >= nrows) break;  // cluster-uniform
        uint32_t w[1][4] = {{d[j][0], d[j][1], d[j][2], d[j][3]}};
        float e[1][8];
        float Rw, Sw;
        warp_exp_early<1>(w, e, Rw, Sw);

        if (j == 0) cluster_wait();  // all CTAs running, all their mbarriers initialised

        const uint32_t bar = smem_u32(&cbar[j]);
        if (lane < K) st_async_f2(smem_u32(&cred[j][rank * NW + wid]), bar, (uint32_t)lane, Rw, Sw);
        mbar_wait_parity(bar, 0u);  // all K*NW partials of row j have landed

        float px[MAXP], py[MAXP];
        float m = -INFINITY;
#pragma unroll
        for (int q = 0; q < MAXP; ++q) {
            const int jj = lane + 32 * q;
            px[q] = -INFINITY;
            py[q] = 0.0f;
            if (jj < NSLOT) {
                const float2 c = cred[j][jj];
                px[q] = c.x;
                py[q] = c.y;
            }
            m = fmaxf(m, px[q]);
        }
        const float Rc = warp_max_f(m);
        const float Rcs = safe_max(Rc);
        const float G = warp_to_final(Rw, Rcs);
        float sacc = 0.0f;
#pragma unroll
        for (int q = 0; q < MAXP; ++q) sacc = fmaf(py[q], fast_ex2(px[q] - Rcs), sacc);
        const float Sc = warp_sum_f(sacc);
        if (has) y[(size_t)j * (size_t)nvec] = make_out_e(e[0], G * (1.0f / Sc));
    }
}

// ---------------------------------------------------------------------------------------
// Generic two-pass kernel (natural-log online partials).
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    const float M = fmaxf(m, m2);
    const float Ms = safe_max(M);
    s = s * expf(m - Ms) + s2 * expf(m2 - Ms);
    m = M;
}

__device__ __forceinline__ void online_add(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v);
        m = v;
    }
    s += expf(v - safe_max(m));
}

__device__ __forceinline__ void warp_reduce(float& m, float& s) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        combine(m, s, m2, s2);
    }
}

__device__ __forceinline__ void block_reduce(float& m, float& s, float2* red, int lane, int wid,
                                             int nw) {
    warp_reduce(m, s);
    if (lane == 0) red[wid] = make_float2(m, s);
    __syncthreads();
    const float2 p = (lane < nw) ? red[lane] : make_float2(-INFINITY, 0.0f);
    m = p.x;
    s = p.y;
    warp_reduce(m, s);
}

__device__ __forceinline__ uint4 make_out(const uint32_t (&w)[4], float Ms, float inv) {
    uint4 o;
    o.x = pack_bf2(expf(bf_lo(w[0]) - Ms) * inv, expf(bf_hi(w[0]) - Ms) * inv);
    o.y = pack_bf2(expf(bf_lo(w[1]) - Ms) * inv, expf(bf_hi(w[1]) - Ms) * inv);
    o.z = pack_bf2(expf(bf_lo(w[2]) - Ms) * inv, expf(bf_hi(w[2]) - Ms) * inv);
    o.w = pack_bf2(expf(bf_lo(w[3]) - Ms) * inv, expf(bf_hi(w[3]) - Ms) * inv);
    return o;
}

template <bool VEC>
__global__ void __launch_bounds__(1024)
    softmax_generic(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                    int C) {
    __shared__ float2 red[32];
    const int tid = threadIdx.x;
    const int bs = blockDim.x;
    const int lane = tid & 31;
    const int wid = tid >> 5;
    const int nw = bs >> 5;
    const uint64_t pol = make_load_policy();

    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        float m = -INFINITY, s = 0.0f;
        if (VEC) {
            const int nvec = C >> 3;
            const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
            for (int i = tid; i < nvec; i += bs) {
                const uint4 v = ld_in_v4(x + i, pol);
                if (i == 0)
                    prefetch_out_range(out + (size_t)row * C, (size_t)C * sizeof(__nv_bfloat16));
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    online_add(m, s, bf_lo(w[j]));
                    online_add(m, s, bf_hi(w[j]));
                }
            }
        } else {
            const __nv_bfloat16* x = in + (size_t)row * C;
            for (int j = tid; j < C; j += bs) {
                const float v = __bfloat162float(x[j]);
                if (j == 0)
                    prefetch_out_range(out + (size_t)row * C, (size_t)C * sizeof(__nv_bfloat16));
                online_add(m, s, v);
            }
        }

        block_reduce(m, s, red, lane, wid, nw);
        const float Ms = safe_max(m);
        const float inv = 1.0f / s;

        if (VEC) {
            const int nvec = C >> 3;
            const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
            uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec;
            for (int i = tid; i < nvec; i += bs) {
                const uint4 v = ld_in_v4(x + i, pol);
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
                y[i] = make_out(w, Ms, inv);
            }
        } else {
            const __nv_bfloat16* x = in + (size_t)row * C;
            __nv_bfloat16* y = out + (size_t)row * C;
            for (int j = tid; j < C; j += bs)
                y[j] = __float2bfloat16_rn(expf(__bfloat162float(x[j]) - Ms) * inv);
        }
        if (row + (int)gridDim.x < N) __syncthreads();  // protect red[] before reuse
    }
}

// ---------------------------------------------------------------------------------------
// Host-side launchers
// ---------------------------------------------------------------------------------------
template <int V>
inline void launch_warp(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    constexpr int WPB = 4;
    const int grid = (int)(((long long)N + WPB - 1) / WPB);
    softmax_warp_reg<V, WPB><<<grid, WPB * 32>>>(out, in, N, C);
}

template <int BS, int V>
inline void launch_block(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    softmax_block_reg<BS, V><<<N, BS>>>(out, in, N, C);
}

// Round-5 cluster kernel launcher (cluster size k), with a cached co-residency check.
template <int BS, int V>
bool try_cluster(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C, int k) {
    static int max_clusters[kMaxCluster + 1] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    void (*kern)(__nv_bfloat16*, const __nv_bfloat16*, int, int) = softmax_cluster<BS, V>;

#if SOFTMAX_CLUSTER_BIG_SMEM
    static int attr_state = 0;  // 0: not set yet, 1: ok, -1: failed
    if (attr_state == 0) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kClusterSmemBytes) == cudaSuccess) {
            attr_state = 1;
        } else {
            (void)cudaGetLastError();
            attr_state = -1;
        }
    }
    if (attr_state < 0) return false;
    const size_t dyn_smem = (size_t)kClusterSmemBytes;
#else
    const size_t dyn_smem = 0;
#endif

    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)k;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(N * k), 1, 1);
    cfg.blockDim = dim3(BS, 1, 1);
    cfg.dynamicSmemBytes = dyn_smem;
    cfg.stream = 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;

    if (max_clusters[k] < 0) {
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, (const void*)kern, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();
            n = 0;
        }
        max_clusters[k] = n;
    }
    if (N > max_clusters[k]) return false;

    if (cudaLaunchKernelEx(&cfg, kern, out, in, N, C) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

bool launch_cluster(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    const int nvec = C >> 3;
    const int kdes = (N <= 16) ? 8 : ((N <= 32) ? 4 : 2);
    for (int k = kdes; k >= 2; k >>= 1) {
        const int slice = (nvec + k - 1) / k;
        bool ok = false;
        if (slice <= 64)        ok = try_cluster<64, 1>(out, in, N, C, k);
        else if (slice <= 128)  ok = try_cluster<128, 1>(out, in, N, C, k);
        else if (slice <= 256)  ok = try_cluster<256, 1>(out, in, N, C, k);
        else if (slice <= 512)  ok = try_cluster<256, 2>(out, in, N, C, k);
        else if (slice <= 1024) ok = try_cluster<256, 4>(out, in, N, C, k);
        else if (slice <= 2048) ok = try_cluster<512, 4>(out, in, N, C, k);
        if (ok) return true;
    }
    return false;
}

// Row-staggered cluster kernel launcher: grid = ceil(N/R) clusters of K CTAs. Falls back
// (returns false) when the clusters cannot all be co-resident or the launch is refused.
template <int BS, int K, int R>
bool try_rows(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    static int max_clusters = -1;
    void (*kern)(__nv_bfloat16*, const __nv_bfloat16*, int, int) =
        softmax_cluster_rows<BS, K, R>;

#if SOFTMAX_ROWS_BIG_SMEM
    static int attr_state = 0;  // 0: not set yet, 1: ok, -1: failed
    if (attr_state == 0) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kClusterSmemBytes) == cudaSuccess) {
            attr_state = 1;
        } else {
            (void)cudaGetLastError();
            attr_state = -1;
        }
    }
    if (attr_state < 0) return false;
    const size_t dyn_smem = (size_t)kClusterSmemBytes;
#else
    const size_t dyn_smem = 0;
#endif

    const int nclusters = (int)(((long long)N + R - 1) / R);

    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)K;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(nclusters * K), 1, 1);
    cfg.blockDim = dim3(BS, 1, 1);
    cfg.dynamicSmemBytes = dyn_smem;
    cfg.stream = 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;

    if (max_clusters < 0) {
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, (const void*)kern, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();
            n = 0;
        }
        max_clusters = n;
    }
    if (nclusters > max_clusters) return false;

    if (cudaLaunchKernelEx(&cfg, kern, out, in, N, C) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

// C in (8192, 16384] (nvec in (1024, 2048]); R = ceil(N*K/TARGET) rounded up to 1/2/4/8.
bool launch_rows(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    constexpr int K = SOFTMAX_ROWS_K;
    static_assert(K == 2 || K == 4 || K == 8, "SOFTMAX_ROWS_K must be 2, 4 or 8");
    constexpr int BS = 2048 / K;  // per = ceil(nvec/K) <= 2048/K = BS
    const int nvec = C >> 3;
    if (nvec <= 1024 || nvec > 2048) return false;
    const long long need =
        ((long long)N * K + SOFTMAX_ROWS_TARGET_CTAS - 1) / SOFTMAX_ROWS_TARGET_CTAS;
    if (need < SOFTMAX_ROWS_MIN_R) return false;
    if (need <= 1) return try_rows<BS, K, 1>(out, in, N, C);
    if (need <= 2) return try_rows<BS, K, 2>(out, in, N, C);
    if (need <= 4) return try_rows<BS, K, 4>(out, in, N, C);
    if (need <= 8) return try_rows<BS, K, 8>(out, in, N, C);
    return false;
}

}  // namespace

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        const bool aligned =
            ((reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(input)) & 15u) == 0;
        if ((C & 7) == 0 && aligned) {
            const int nvec = C >> 3;
            bool done = false;
#if SOFTMAX_ROWS
            if (nvec > 1024 && nvec <= 2048 && (SOFTMAX_ROWS_SMALLN || N > 64))
                done = launch_rows(out, input, N, C);  // C in (8192, 16384]
#endif
            if (!done && N <= 64 && nvec >= 2048) done = launch_cluster(out, input, N, C);
            if (!done) {
                if (nvec <= 32)        launch_warp<1>(out, input, N, C);        // C <= 256
                else if (nvec <= 64)   launch_warp<2>(out, input, N, C);        // C <= 512
                else if (nvec <= 128)  launch_warp<4>(out, input, N, C);        // C <= 1024
                else if (nvec <= 256)  launch_block<128, 2>(out, input, N, C);  // C <= 2048
                else if (nvec <= 512)  launch_block<256, 2>(out, input, N, C);  // C <= 4096
                else if (nvec <= 1024) launch_block<256, 4>(out, input, N, C);  // C <= 8192
#if SOFTMAX_C16K_BS1024
                else if (nvec <= 2048) launch_block<1024, 2>(out, input, N, C); // C <= 16384
#else
                else if (nvec <= 2048) launch_block<512, 4>(out, input, N, C);  // C <= 16384
#endif
                else if (nvec <= 4096) launch_block<512, 8>(out, input, N, C);  // C <= 32768
                else softmax_generic<true><<<N, 1024>>>(out, input, N, C);
            }
        } else {
            int threads = (C + 3) / 4;
            threads = (threads + 31) & ~31;
            if (threads < 32) threads = 32;
            if (threads > 1024) threads = 1024;
            softmax_generic<false><<<N, threads>>>(out, input, N, C);
        }
    }
    cudaDeviceSynchronize();
}
