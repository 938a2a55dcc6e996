// Row-parallel BF16 softmax for sm_90a (round 9, from round 5).
//
//  * C % 8 == 0 and 16-byte aligned pointers:
//      - N <= 64 and C >= 16384 : the row is split across a thread-block cluster of k CTAs
//                                 (k = 8/4/2). Each CTA handles a contiguous slice of the row.
//                                 Every warp pushes its (R, S) partial one-way to every peer
//                                 with st.async + mbarrier complete_tx (flat, one-level
//                                 exchange: no CTA barrier, no block-level reduce stage).
//      - C <= 1024              : one warp per row, row kept in registers.
//      - C <= 32768             : one CTA per row, row kept in registers.
//      - larger C               : vectorized two-pass kernel.
//  * anything else (C % 8 != 0, misaligned pointers): coalesced scalar two-pass kernel.
//
// All vectorized input loads are L2 evict-first (cache policy), L1 no-allocate.
//
// Output-side first touch: right after a CTA has issued its input loads, one thread issues
// prefetch.global.L2 on the first line of the CTA's output range (and on the last line if it
// lies in another 64 KB region), so the address translation of the output pages overlaps the
// input's DRAM round trip instead of sitting on the store tail.
//
// Register-resident paths compute each exp once, per 8-element chunk, relative to the
// chunk max, in log2 units:
//     r_k = m_k*log2e,  e = ex2(fma(x, log2e, -r_k)),  s_k = sum(e)
// Warp level: R_w = max r_k, f_k = ex2(r_k - R_w), S_w = sum s_k f_k.
// Higher levels combine (R, S) pairs. Final output: bf16(e * (f_k * G * inv)) with
// G = ex2(R_w - R_final), inv = 1/S_final: one ex2 per thread after the final max.
//
// Round 9 changes (each behind a macro; every other path is unchanged from round 5):
//  * SOFTMAX_CLUSTER_LOADS_FIRST: the cluster kernel issues its input loads before the
//    mbarrier init / cluster-scope fence / cluster arrive.
//  * SOFTMAX_CL_SLICE1024_BS512 / SOFTMAX_CL_SLICE512_BS512: cluster CTA shapes
//    (slice 1024 uint4: <512,2> vs <256,4>; slice 512: <512,1> vs <256,2>).
//  * SOFTMAX_SPLIT_PACK: in the cluster kernel and the C > 2048 block paths, SPLIT_PACK of
//    the 4 bf16x2 words of every 16-byte output chunk are packed with an integer
//    round-half-up (IADD + IADD + PRMT) instead of F2FP, splitting the output conversion
//    over two pipes. Valid because every stored value is finite and >= 0 (error <= 0.5 ulp;
//    only exact ties differ from RNE).
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
#ifndef SOFTMAX_CLUSTER_LOADS_FIRST
#define SOFTMAX_CLUSTER_LOADS_FIRST 1  // 1: cluster kernel loads before mbarrier init/fence/arrive
#endif
#ifndef SOFTMAX_CL_SLICE1024_BS512
#define SOFTMAX_CL_SLICE1024_BS512 1  // 1: cluster slice <= 1024 uint4 uses <512,2>; 0: <256,4>
#endif
#ifndef SOFTMAX_CL_SLICE512_BS512
#define SOFTMAX_CL_SLICE512_BS512 0  // 1: cluster slice <= 512 uint4 uses <512,1>; 0: <256,2>
#endif
#ifndef SOFTMAX_SPLIT_PACK
// Words (of the 4 bf16x2 words of a 16-byte output chunk) packed with the integer
// round-half-up instead of F2FP, in the cluster kernel and the C > 2048 block paths.
// 0: all F2FP (round-5 behaviour), 2: half, 3: three quarters, 4: all integer.
#define SOFTMAX_SPLIT_PACK 2
#endif
#ifndef SOFTMAX_CLUSTER_PROBE_NO_EXCHANGE
// TIMING PROBE ONLY. 1: the cluster kernel skips the cross-CTA exchange and normalises with
// its local partials. The OUTPUT IS WRONG. Never ship with this set.
#define SOFTMAX_CLUSTER_PROBE_NO_EXCHANGE 0
#endif

namespace {

constexpr uint32_t kNegInfBF2 = 0xFF80FF80u;  // two bf16 -inf values
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxCluster = 8;
constexpr int kClusterSmemBytes = 120 * 1024;  // > half an SM: one cluster CTA per SM

static_assert(SOFTMAX_SPLIT_PACK >= 0 && SOFTMAX_SPLIT_PACK <= 4,
              "SOFTMAX_SPLIT_PACK must be in [0, 4]");

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

// Same load as ld_in_v4, but as volatile asm: the compiler keeps it in program order with
// respect to the other volatile asm (mbarrier init, fence, cluster arrive), so the cluster
// kernel's loads really are issued before its barrier setup.
__device__ __forceinline__ uint4 ld_in_v4_ordered(const uint4* p, uint64_t pol) {
    uint4 r;
#if SOFTMAX_L2_EVICT_FIRST
#if SOFTMAX_L2_256B
    asm volatile(
        "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(pol));
#else
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p), "l"(pol));
#endif
#else
    (void)pol;
#if SOFTMAX_L2_256B
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
#endif
#endif
    return r;
}

// ---------------------------------------------------------------------------------------
// Output-range L2 prefetch (address translation of the output pages off the store tail).
// Issues a prefetch on the line holding the first byte of [base, base + bytes), and a second
// one on the line holding the last byte if that lies in a different 64 KB region.
// Call from ONE thread per CTA.
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

// Round-to-nearest-even bf16x2 packing on the integer ALU. Valid for finite values
// (the register paths only store finite, non-negative values); bit-identical to
// __floats2bfloat162_rn for them.
__device__ __forceinline__ uint32_t pack_bf2_int(float lo, float hi) {
    uint32_t a = __float_as_uint(lo);
    uint32_t b = __float_as_uint(hi);
    a += 0x7fffu + ((a >> 16) & 1u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return __byte_perm(a, b, 0x7632);  // low half = a[31:16], high half = b[31:16]
}

// Round-half-up bf16x2 packing on the integer ALU: 2 IADD + 1 PRMT per pair.
// Valid for finite, non-negative values (all the register paths ever store, including
// subnormals and 0): the bf16 encoding of such values is monotone in the f32 bit
// pattern, so adding half a bf16 ulp (0x8000) and truncating rounds to nearest with
// ties up; a mantissa carry correctly bumps the exponent. Error <= 0.5 bf16 ulp.
__device__ __forceinline__ uint32_t pack_bf2_rhu(float lo, float hi) {
    const uint32_t a = __float_as_uint(lo) + 0x8000u;
    const uint32_t b = __float_as_uint(hi) + 0x8000u;
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

// As load_raw, with the volatile (program-ordered) load. Used by the cluster kernel so its
// loads are issued ahead of the mbarrier init / fence / cluster arrive.
template <int V, int STRIDE>
__device__ __forceinline__ void load_raw_ordered(const uint4* __restrict__ x, int t, int cnt,
                                                 uint32_t (&d)[V][4]) {
    const uint64_t pol = make_load_policy();
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int i = t + k * STRIDE;
        uint4 v = make_uint4(kNegInfBF2, kNegInfBF2, kNegInfBF2, kNegInfBF2);
        if (i < cnt) v = ld_in_v4_ordered(x + i, pol);
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
// S = sum 2^(x*log2e - safe(R)). Every lane gets the result. f[k] = 2^(r_k - safe(R)) is
// kept: it is the chunk -> warp rescale factor used again at store time.
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

// Warp -> final rescale factor. A warp with no finite value (Rw = -inf) has all f = 0 and
// e = 0; G = 0 then keeps every product finite.
__device__ __forceinline__ float warp_to_final(float Rw, float Rfs) {
    return (Rw == -INFINITY) ? 0.0f : fast_ex2(Rw - Rfs);
}

// Combine the warp partials of a CTA (one barrier). NW must be a power of two, <= 32.
// Every thread gets the same (Rb, Sb). G (this warp -> block rescale) is computed right
// after the block max is known, so its ex2 overlaps the sum butterfly.
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

// Split-pipe packing: words j >= 4 - SOFTMAX_SPLIT_PACK use the integer round-half-up
// (IADD/PRMT), the others the conversion pipe (F2FP via pack_out). Only for values that are
// finite and >= 0, which is all the register paths store.
__device__ __forceinline__ uint4 make_out_split(const float (&e)[8], float sc) {
    constexpr int kFirstInt = 4 - SOFTMAX_SPLIT_PACK;
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float lo = e[2 * j] * sc;
        const float hi = e[2 * j + 1] * sc;
        if (j >= kFirstInt)
            w[j] = pack_bf2_rhu(lo, hi);
        else
            w[j] = pack_out(lo, hi);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// As scale_store, with the split-pipe packing.
template <int V, int STRIDE>
__device__ __forceinline__ void scale_store_split(uint4* __restrict__ y, int t, int cnt,
                                                  const float (&e)[V][8], const float (&f)[V],
                                                  float scale) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int i = t + k * STRIDE;
        if (i < cnt) {
            const float sc = f[k] * scale;
            y[i] = make_out_split(e[k], sc);
        }
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
        // One prefetch (two at a 64 KB boundary) covering the CTA's contiguous rows.
        const int last = min(N, base + WPB);
        prefetch_out_range(out + (size_t)base * C,
                           (size_t)(last - base) * (size_t)C * sizeof(__nv_bfloat16));
    }
    float e[V][8], r[V], s[V], f[V];
    exp_chunks<V>(d, e, r, s);
    float R, S;
    warp_partial<V>(r, s, f, R, S);
    scale_store<V, 32>(y, lane, nvec, e, f, 1.0f / S);  // warp max is the final max: G = 1
}

// ---------------------------------------------------------------------------------------
// One CTA per row, row in registers. Requires C % 8 == 0, 16B-aligned pointers,
// C/8 <= BS*V. Grid = N.
// Instantiations whose capacity exceeds 256 uint4 (C > 2048) use the split-pipe packing;
// the C <= 2048 instantiation keeps the round-5 store (control path).
// ---------------------------------------------------------------------------------------
template <int BS, int V>
__global__ void __launch_bounds__(BS)
    softmax_block_reg(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                      int C) {
    constexpr int NW = BS / 32;
    constexpr bool kSplit = (BS * V > 256);
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
    float e[V][8], r[V], s[V], f[V];
    exp_chunks<V>(d, e, r, s);
    float Rw, Sw;
    warp_partial<V>(r, s, f, Rw, Sw);
    float Rb, Sb, G;
    block_combine<NW>(Rw, Sw, red, lane, wid, Rb, Sb, G);
    if (kSplit)
        scale_store_split<V, BS>(y, tid, nvec, e, f, G * (1.0f / Sb));
    else
        scale_store<V, BS>(y, tid, nvec, e, f, G * (1.0f / Sb));
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
// One cluster of k CTAs per row (k from the launch attribute, 2..8). CTA `rank` handles
// the contiguous slice [rank*per, rank*per + per) of the row's uint4 chunks, where
// per = ceil(nvec/k) <= BS*V. Requires C % 8 == 0 and 16B-aligned pointers.
//
// Prologue (SOFTMAX_CLUSTER_LOADS_FIRST = 1): k, rank, row and the slice come from special
// registers, so the input loads are the very first memory operations of every warp. Only
// then does thread 0 prefetch the output range, init the mbarrier, post expect_tx and
// issue fence.mbarrier_init.release.cluster, and every thread do the relaxed cluster
// arrive. The ordering the exchange needs is unchanged: init -> fence -> arrive (thread 0),
// arrive -> wait (all CTAs), wait -> st.async.
//
// Flat exchange (SOFTMAX_CLUSTER_FLAT = 1): every CTA owns one mbarrier expecting
// k*NW*8 bytes. After its warp partial (and the one cluster wait that guarantees every
// peer started and initialised its mbarrier), lane j < k of every warp pushes that warp's
// (R_w, S_w) into slot [rank*NW + wid] of peer j with st.async. Each CTA waits on its own
// mbarrier only, then every warp reduces the k*NW pairs itself (redux max, one ex2 per
// pair, xor sum). No __syncthreads, no block-level reduce stage. A CTA exits only after
// all messages addressed to it have landed, and no CTA reads remote shared memory, so no
// trailing cluster barrier is needed.
//
// Empty slices (cnt <= 0) and all -inf warps still push (-inf, 0): every slot is filled,
// so the single parity wait always completes.
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
    const int lane = tid & 31;
    const int wid = tid >> 5;
    const int k = (int)cluster_nctarank();
    const int rank = (int)cluster_ctarank();
    const int row = (int)cluster_id_x();
    const uint32_t bar = smem_u32(&cbar);
    const int nvec = C >> 3;
    const int per = (nvec + k - 1) / k;
    const int start = rank * per;
    const int cnt = min(per, nvec - start);  // may be <= 0: empty slice, still participates

    const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec + start;
    uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec + start;

    uint32_t d[V][4];
#if SOFTMAX_CLUSTER_LOADS_FIRST
    // Input loads first: nothing (fence, arrive) sits in front of them.
    load_raw_ordered<V, BS>(x, tid, cnt, d);
    if (tid == 0) {
        if (cnt > 0) prefetch_out_range(y, (size_t)cnt * sizeof(uint4));
        mbar_init(bar, 1u);
        mbar_arrive_expect_tx(bar, (uint32_t)(k * MSG_PER_PEER * (int)sizeof(float2)));
        fence_mbarrier_init();
    }
    // Non-blocking arrive. The matching wait, before the first DSMEM store, guarantees
    // that every peer CTA has started and its mbarrier is initialised.
    cluster_arrive_relaxed();
#else
    if (tid == 0) {
        mbar_init(bar, 1u);
        mbar_arrive_expect_tx(bar, (uint32_t)(k * MSG_PER_PEER * (int)sizeof(float2)));
        fence_mbarrier_init();
    }
    // Non-blocking arrive. The matching wait, before the first DSMEM store, guarantees
    // that every peer CTA has started and its mbarrier is initialised.
    cluster_arrive_relaxed();

    load_raw<V, BS>(x, tid, cnt, d);
    if (tid == 0 && cnt > 0) prefetch_out_range(y, (size_t)cnt * sizeof(uint4));
#endif
    float e[V][8], r[V], s[V], f[V];
    exp_chunks<V>(d, e, r, s);
    float Rw, Sw;
    warp_partial<V>(r, s, f, Rw, Sw);

#if SOFTMAX_CLUSTER_PROBE_NO_EXCHANGE
    // TIMING PROBE ONLY: local normalisation, wrong output.
    (void)bar;
    (void)MSG_PER_PEER;
    (void)lane;
    (void)wid;
    cluster_wait();
    scale_store_split<V, BS>(y, tid, cnt, e, f, 1.0f / Sw);
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
    scale_store_split<V, BS>(y, tid, cnt, e, f, G * (1.0f / Sc));
#else
    float Rb, Sb, Gb;
    block_combine<NW>(Rw, Sw, red, lane, wid, Rb, Sb, Gb);
    (void)Gb;

    cluster_wait();  // all CTAs of the cluster are running, their mbarriers initialised
    if (tid < k) st_async_f2(smem_u32(&cred[rank]), bar, (uint32_t)tid, Rb, Sb);
    mbar_wait_parity(bar, 0u);  // all k partials have landed in our cred[]

    float Rc = -INFINITY;
    for (int j = 0; j < k; ++j) Rc = fmaxf(Rc, cred[j].x);
    const float Rcs = safe_max(Rc);
    const float G = warp_to_final(Rw, Rcs);
    float Sc = 0.0f;
    for (int j = 0; j < k; ++j) {
        const float2 c = cred[j];
        Sc = fmaf(c.y, fast_ex2(c.x - Rcs), Sc);
    }
    scale_store_split<V, BS>(y, tid, cnt, e, f, G * (1.0f / Sc));
#endif
}

// ---------------------------------------------------------------------------------------
// Generic two-pass kernel (natural-log online partials).
// It handles any C or alignment when VEC == false, and C % 8 == 0 with aligned pointers
// when VEC == true. blockDim.x must be a multiple of 32, <= 1024.
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
                if (i == 0)  // thread 0, first iteration: its first load is in flight
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
                if (j == 0)  // thread 0, first iteration
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

// Launch the cluster kernel with cluster size k, but only if all N clusters can be
// co-resident (checked once per (instantiation, k), cached). Returns false if not launched.
// Co-residency is not needed for correctness (the CTAs of one cluster are always
// co-scheduled); the check only avoids a launch that would be refused.
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

// Cluster path for small N and long rows. Try the preferred cluster size first, then
// smaller ones.
//   case 3  (N=16, C=16384): k = 8, slice  256 -> <256,1>
//   case 7  (N=32, C=16384): k = 4, slice  512 -> <256,2> (or <512,1>)
//   case 11 (N=64, C=16384): k = 2, slice 1024 -> <512,2> (or <256,4>)
bool launch_cluster(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    const int nvec = C >> 3;
    const int kdes = (N <= 16) ? 8 : ((N <= 32) ? 4 : 2);
    for (int k = kdes; k >= 2; k >>= 1) {
        const int slice = (nvec + k - 1) / k;
        bool ok = false;
        if (slice <= 64)        ok = try_cluster<64, 1>(out, in, N, C, k);
        else if (slice <= 128)  ok = try_cluster<128, 1>(out, in, N, C, k);
        else if (slice <= 256)  ok = try_cluster<256, 1>(out, in, N, C, k);
#if SOFTMAX_CL_SLICE512_BS512
        else if (slice <= 512)  ok = try_cluster<512, 1>(out, in, N, C, k);
#else
        else if (slice <= 512)  ok = try_cluster<256, 2>(out, in, N, C, k);
#endif
#if SOFTMAX_CL_SLICE1024_BS512
        else if (slice <= 1024) ok = try_cluster<512, 2>(out, in, N, C, k);
#else
        else if (slice <= 1024) ok = try_cluster<256, 4>(out, in, N, C, k);
#endif
        else if (slice <= 2048) ok = try_cluster<512, 4>(out, in, N, C, k);
        if (ok) return true;
    }
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
            if (N <= 64 && nvec >= 2048) done = launch_cluster(out, input, N, C);  // C >= 16384
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
