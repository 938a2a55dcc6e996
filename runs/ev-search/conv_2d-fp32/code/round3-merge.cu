// cudamaster dispatch: conv_2d() runs path 1 when kernel_rows < 23, else path 0 (predicted weighted speedup 15.7x)
#include <cuda_runtime.h>
#include <stdint.h>
#include <cuda_fp16.h>

namespace cm_path0 {
// round3-c1: tensor-core Toeplitz path (cm_tc) added in front of the round2-merge dispatch.
// cudamaster dispatch: conv_2d() runs path 1 when kernel_rows < 23, else path 0 (predicted weighted speedup 10.9x)



namespace cm_path0 {
// conv_2d (fp32), valid 2-D cross-correlation, Hopper (sm_90a).
//
// Two paths:
//  (A) Winograd-over-kernel-sub-blocks path (even kh, kw in [16, 32]):
//      The kernel is split into 2x2 sub-blocks (a, b). The 1-D minimal filter F(2,2)
//        data (x0,x1,x2) -> (x0-x1, x1, x2-x1), weights (w0,w1) -> (w0, w0+w1, w1),
//        outputs (m0,m1,m2) -> (m0+m1, m1+m2)
//      is nested in both directions (9 components (cv, ch)); all sums over (a, b) happen in the
//      transformed domain:  M_{cv,ch}[i][j] = sum_{a,b} U_{cv,ch}[a][b] * V_{cv,ch}[i+a][j+b],
//      out[2i+r][2j+s] = sum A[r][cv] A[s][ch] M_{cv,ch}[i][j],  A = [[1,1,0],[0,1,1]].
//      9/4 * (kh/2)*(kw/2) FMA per output instead of kh*kw (1.78x fewer for k=32).
//      * CTA = 12 compute warps + 1 producer/transform warp, one CTA per SM.
//      * Producer: raw input rows (global, coalesced, L2-prefetched two stages ahead) are
//        horizontally transformed into 3 planes H_ch[row][v] and written into a 5-stage ring
//        (stage = 32 raw rows); even and odd raw rows live in separate sub-rings, pitch 84 floats
//        (== 4 mod 8 -> conflict-free LDS.128 for 8 consecutive sub-ring rows).
//      * Compute warp = (class ch, 16-block-column group); lane = block row i (output rows 2i,
//        2i+1). The vertical transform (T = R0-R1, M = R1, B = R2-R1) is formed on the fly from
//        three sliding float4 windows; 48 accumulators (T/M/B x 16 block columns).
//      * U (kernel transform) computed once per CTA in double, rounded once.
//      * Epilogue: Z_ch staged in smem, named barrier, out = Z0+Z1 / Z1+Z2, coalesced stores.
//  (B) round1-c2 persistent column-strip FFMA kernel (all other shapes), unchanged.



#define TW 128            // output columns per strip
#define BH 32             // output rows per step == input rows per stage
#define NS 4              // ring stages
#define RING (NS * BH)    // ring rows (power of two)
#define CC 16             // output columns per thread
#define RR 2              // output rows per thread
#define NCW 4             // compute warps
#define NCT (NCW * 32)    // compute threads
#define NTHREADS (NCT + 32)
#define KH_MAX (2 * BH + 1)
#define SP 36             // staging pitch (floats), == 4 mod 8

template <int KWP>
struct Cfg {
    static constexpr int P = ((TW + KWP) % 8 == 0) ? (TW + KWP + 4) : (TW + KWP);
    static constexpr size_t RING_BYTES = (size_t)RING * P * 4;
    static constexpr size_t STG_BYTES = (size_t)NCW * 32 * SP * 4;
    static constexpr size_t W_BYTES = (size_t)KH_MAX * KWP * 4;
    static constexpr size_t BAR_OFF = RING_BYTES + STG_BYTES + W_BYTES;
    static constexpr size_t SMEM = BAR_OFF + 2 * NS * 8;
};

// ------------------------------------------------------------------ PTX helpers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void l2_prefetch(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
__device__ __forceinline__ float4 lds4(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}

// ------------------------------------------------------------------ c2 main kernel (unchanged)
template <int KWP>
__global__ void __launch_bounds__(NTHREADS, 2)
conv2d_strip_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                    float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo,
                    int stepsPerSeg, int bulk) {
    constexpr int P = Cfg<KWP>::P;
    extern __shared__ __align__(128) unsigned char smem[];
    float* sRing = reinterpret_cast<float*>(smem);
    float* sStg = reinterpret_cast<float*>(smem + Cfg<KWP>::RING_BYTES);
    float* sW = reinterpret_cast<float*>(smem + Cfg<KWP>::RING_BYTES + Cfg<KWP>::STG_BYTES);
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + Cfg<KWP>::BAR_OFF);
    const uint32_t fullBase = smem_u32(bars);           // full[s]  = fullBase + 8*s
    const uint32_t emptyBase = smem_u32(bars + NS);     // empty[s] = emptyBase + 8*s

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int x0 = blockIdx.x * TW;
    const int R0 = blockIdx.y * stepsPerSeg * BH;
    const int R1 = min(Ho, R0 + stepsPerSeg * BH);
    const int nSteps = (R1 - R0 + BH - 1) / BH;
    const int span = 1 + (kh - 1 + BH - 1) / BH;   // stages touched by one step
    const int nStages = nSteps + span - 1;

    if (tid == 0) {
        for (int s = 0; s < NS; ++s) {
            mbar_init(fullBase + 8 * s, bulk ? 1u : 32u);
            mbar_init(emptyBase + 8 * s, (uint32_t)NCT);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    {   // zero the ring once (columns past the image edge must be finite: they meet zero weights)
        float4* r4 = reinterpret_cast<float4*>(sRing);
        const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int i = tid; i < RING * P / 4; i += NTHREADS) r4[i] = z;
        for (int i = tid; i < kh * KWP; i += NTHREADS) {
            const int m = i / KWP, n = i - m * KWP;
            sW[i] = (n < kw) ? __ldg(ker + (size_t)m * kw + n) : 0.f;
        }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();

    // ================================================================ producer warp
    if (warp == NCW) {
        const int lrowFull = (TW + kw - 1 + 3) & ~3;
        const int lrow = min(lrowFull, W - x0);
        for (int g = 0; g < nStages; ++g) {
            const int slot = g % NS;
            if (g >= NS) mbar_wait(emptyBase + 8 * slot, (uint32_t)(((g / NS) - 1) & 1));
            const int grow0 = R0 + g * BH;
            int nvalid = H - grow0;
            nvalid = nvalid < 0 ? 0 : (nvalid > BH ? BH : nvalid);
            float* dstBase = sRing + (size_t)slot * BH * P;
            const uint32_t fb = fullBase + 8 * slot;
            if (bulk) {
                if (lane == 0) mbar_arrive_expect_tx(fb, (uint32_t)(nvalid * lrow * 4));
                __syncwarp();
                if (lane < nvalid) {
                    bulk_g2s(smem_u32(dstBase + lane * P), in + (size_t)(grow0 + lane) * W + x0,
                             (uint32_t)(lrow * 4), fb);
                }
            } else {
                for (int r = 0; r < nvalid; ++r) {
                    const float* src = in + (size_t)(grow0 + r) * W + x0;
                    const uint32_t dst = smem_u32(dstBase + r * P);
                    for (int c = lane; c < lrow; c += 32) cp_async4(dst + 4u * c, src + c);
                }
                cp_async_mbar_arrive_noinc(fb);
            }
        }
        if (!bulk) asm volatile("cp.async.wait_all;" ::: "memory");
        return;
    }

    // ================================================================ compute warps
    const int cg = tid >> 4;   // column group 0..7 (16 columns each)
    const int rg = tid & 15;   // row group 0..15 (rows rg, rg+16)
    float* stg = sStg + warp * (32 * SP);
    const int scol = (cg & 1) * CC;
    const int ocol = x0 + warp * 32 + lane;

    for (int t = 0; t < nSteps; ++t) {
        for (int g = t; g < t + span; ++g)
            mbar_wait(fullBase + 8 * (g % NS), (uint32_t)((g / NS) & 1));

        float acc[RR][CC];
#pragma unroll
        for (int j = 0; j < RR; ++j)
#pragma unroll
            for (int c = 0; c < CC; ++c) acc[j][c] = 0.f;

        const int rowBase = t * BH + rg;
        for (int m = 0; m < kh; ++m) {
            float w[KWP];
            const float4* wp = reinterpret_cast<const float4*>(sW + m * KWP);
#pragma unroll
            for (int q = 0; q < KWP / 4; ++q) {
                const float4 v = wp[q];
                w[4 * q + 0] = v.x;
                w[4 * q + 1] = v.y;
                w[4 * q + 2] = v.z;
                w[4 * q + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < RR; ++j) {
                const int pr = (rowBase + 16 * j + m) & (RING - 1);
                const float* rp = sRing + pr * P + CC * cg;
                float win[CC + 4];
#pragma unroll
                for (int q = 0; q < CC / 4; ++q) {
                    const float4 v = *reinterpret_cast<const float4*>(rp + 4 * q);
                    win[4 * q + 0] = v.x;
                    win[4 * q + 1] = v.y;
                    win[4 * q + 2] = v.z;
                    win[4 * q + 3] = v.w;
                }
#pragma unroll
                for (int q = 0; q < KWP / 4; ++q) {
                    const float4 v = *reinterpret_cast<const float4*>(rp + CC + 4 * q);
                    win[CC + 0] = v.x;
                    win[CC + 1] = v.y;
                    win[CC + 2] = v.z;
                    win[CC + 3] = v.w;
#pragma unroll
                    for (int d = 0; d < 4; ++d) {
                        const float wv = w[4 * q + d];
#pragma unroll
                        for (int c = 0; c < CC; ++c) acc[j][c] = fmaf(win[c + d], wv, acc[j][c]);
                    }
#pragma unroll
                    for (int c = 0; c < CC; ++c) win[c] = win[c + 4];
                }
            }
        }
        // stage t is no longer needed by this thread
        mbar_arrive(emptyBase + 8 * (t % NS));

        // ---- epilogue: stage the warp's 32x32 tile, then coalesced row stores
#pragma unroll
        for (int j = 0; j < RR; ++j)
#pragma unroll
            for (int q = 0; q < CC / 4; ++q)
                *reinterpret_cast<float4*>(stg + (rg + 16 * j) * SP + scol + 4 * q) =
                    make_float4(acc[j][4 * q + 0], acc[j][4 * q + 1], acc[j][4 * q + 2],
                                acc[j][4 * q + 3]);
        __syncwarp();
        const int orow0 = R0 + t * BH;
        if (ocol < Wo) {
            const int nr = min(BH, R1 - orow0);
            float* op = out + (size_t)orow0 * Wo + ocol;
#pragma unroll 8
            for (int r = 0; r < nr; ++r) op[(size_t)r * Wo] = stg[r * SP + lane];
        }
        __syncwarp();
    }
}

// ------------------------------------------------------------------ generic fallback
__global__ void conv_2d_naive(const float* in, const float* ker, float* out, int W, int kh, int kw,
                              int Ho, int Wo) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < Ho && c < Wo) {
        float acc = 0.0f;
        for (int m = 0; m < kh; ++m) {
            const float* row = in + (size_t)(r + m) * W + c;
            for (int n = 0; n < kw; ++n) acc = fmaf(row[n], ker[m * kw + n], acc);
        }
        out[(size_t)r * Wo + c] = acc;
    }
}

// =================================================================================================
// Winograd F(2x2,2x2) over kernel sub-blocks
// =================================================================================================
#define WTW 128                      // output columns per strip (64 block columns)
#define WSTEP 64                     // output rows per step (32 block rows)
#define WNS 5                        // ring stages
#define WSR 32                       // raw input rows per stage (16 even + 16 odd)
#define WRB (WNS * WSR / 2)          // rows per sub-ring (80)
#define WPB 84                       // plane pitch in floats (== 4 mod 8)
#define WZP 68                       // Z staging pitch in floats (== 4 mod 8)
#define WZCH (2 * 32 * WZP + 8)      // Z staging floats per class; 2*WZCH == 16 (mod 32)
#define WNCW 12                      // compute warps (3 classes x 4 column groups)
#define WNCT (WNCW * 32)             // compute threads
#define WNTHREADS (WNCT + 32)        // + 1 producer warp
#define WKA_MAX 16                   // max kernel block rows (kh <= 32)

template <int KBP>
struct WCfg {
    static constexpr size_t RING_BYTES = (size_t)2 * 3 * WRB * WPB * 4;   // 161280
    static constexpr size_t Z_BYTES = (size_t)3 * WZCH * 4;               // 52320
    static constexpr size_t U_BYTES = (size_t)9 * WKA_MAX * KBP * 4;      // <= 9216
    static constexpr size_t Z_OFF = RING_BYTES;
    static constexpr size_t U_OFF = Z_OFF + Z_BYTES;
    static constexpr size_t BAR_OFF = U_OFF + U_BYTES;
    static constexpr size_t SMEM = BAR_OFF + 2 * WNS * 8;
};

__device__ __forceinline__ void wino_prefetch_row(const float* in, int H, int W, int x0, int grow,
                                                  int pcols) {
    if (grow < H) {
        const float* rp = in + (size_t)grow * W + x0;
        for (int c = 0; c < pcols; c += 32) l2_prefetch(rp + c);
        l2_prefetch(rp + pcols - 1);
    }
}

// Producer / horizontal-transform warp.
// Stage s holds raw rows R0 + 32s + r (r < 32). Raw row r goes to sub-ring (r & 1), row
// slot*16 + (r >> 1); block column v gets H0 = x[2v]-x[2v+1], H1 = x[2v+1], H2 = x[2v+2]-x[2v+1]
// (x relative to column x0; zero outside the image).
template <int KBP, bool V2>
__device__ __forceinline__ void wino_producer(const float* __restrict__ in, float* sRing,
                                              uint32_t fullBase, uint32_t emptyBase, int H, int W,
                                              int x0, int R0, int nStages, int lane) {
    constexpr int NVB = 64 + KBP;          // block columns read by the compute warps
    constexpr int PLANE = WRB * WPB;
    const int pcols = min(2 * NVB + 1, W - x0);

    for (int s = 0; s < 2 && s < nStages; ++s)
        wino_prefetch_row(in, H, W, x0, R0 + s * WSR + lane, pcols);

#pragma unroll 1
    for (int s = 0; s < nStages; ++s) {
        const int slot = s % WNS;
        if (s + 2 < nStages) wino_prefetch_row(in, H, W, x0, R0 + (s + 2) * WSR + lane, pcols);

#pragma unroll 1
        for (int g = 0; g < 2; ++g) {
            float av[16][3], bv[16][3];
            const int rbase = R0 + s * WSR + 16 * g;
#pragma unroll
            for (int rr = 0; rr < 16; ++rr) {
                const int grow = rbase + rr;
                const bool rv = grow < H;
                const float* rp = in + (size_t)(rv ? grow : 0) * W + x0;
#pragma unroll
                for (int k = 0; k < 3; ++k) {
                    const int v = 32 * k + lane;
                    const int lc = 2 * v;
                    float a = 0.f, b = 0.f;
                    if (V2) {
                        if (rv && v <= NVB && x0 + lc < W) {
                            const float2 tv = __ldg(reinterpret_cast<const float2*>(rp + lc));
                            a = tv.x;
                            b = tv.y;
                        }
                    } else {
                        if (rv && v <= NVB && x0 + lc < W) a = __ldg(rp + lc);
                        if (rv && v < NVB && x0 + lc + 1 < W) b = __ldg(rp + lc + 1);
                    }
                    av[rr][k] = a;
                    bv[rr][k] = b;
                }
            }
            // the slot must be free before we overwrite it (loads above are already in flight)
            if (g == 0 && s >= WNS)
                mbar_wait(emptyBase + 8 * slot, (uint32_t)(((s / WNS) - 1) & 1));
#pragma unroll
            for (int rr = 0; rr < 16; ++rr) {
                const int r = 16 * g + rr;   // raw row within the stage
                float* dst = sRing + (size_t)((r & 1) * 3) * PLANE + (slot * 16 + (r >> 1)) * WPB;
#pragma unroll
                for (int k = 0; k < 3; ++k) {
                    const int v = 32 * k + lane;
                    float c = __shfl_down_sync(0xffffffffu, av[rr][k], 1);
                    if (k < 2) {
                        const float cn =
                            __shfl_sync(0xffffffffu, av[rr][(k + 1 < 3) ? (k + 1) : 2], 0);
                        if (lane == 31) c = cn;
                    } else {
                        if (lane == 31) c = 0.f;
                    }
                    if (v < NVB) {
                        const float b = bv[rr][k];
                        dst[v] = av[rr][k] - b;
                        dst[PLANE + v] = b;
                        dst[2 * PLANE + v] = c - b;
                    }
                }
            }
        }
        __syncwarp();
        mbar_arrive(fullBase + 8 * slot);   // count = 32 (every producer lane)
    }
}

__device__ __forceinline__ void win_set(float (&T)[20], float (&M)[20], float (&B)[20], int o,
                                        const float4 p0, const float4 p1, const float4 p2) {
    T[o + 0] = p0.x - p1.x;
    T[o + 1] = p0.y - p1.y;
    T[o + 2] = p0.z - p1.z;
    T[o + 3] = p0.w - p1.w;
    M[o + 0] = p1.x;
    M[o + 1] = p1.y;
    M[o + 2] = p1.z;
    M[o + 3] = p1.w;
    B[o + 0] = p2.x - p1.x;
    B[o + 1] = p2.y - p1.y;
    B[o + 2] = p2.z - p1.z;
    B[o + 3] = p2.w - p1.w;
}

template <int KBP>
__global__ void __launch_bounds__(WNTHREADS, 1)
conv2d_wino_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                   float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo,
                   int segLen, int vec2) {
    constexpr int PLANE = WRB * WPB;
    extern __shared__ __align__(128) unsigned char wsmem[];
    float* sRing = reinterpret_cast<float*>(wsmem);
    float* sZ = reinterpret_cast<float*>(wsmem + WCfg<KBP>::Z_OFF);
    float* sU = reinterpret_cast<float*>(wsmem + WCfg<KBP>::U_OFF);
    uint64_t* bars = reinterpret_cast<uint64_t*>(wsmem + WCfg<KBP>::BAR_OFF);
    const uint32_t fullBase = smem_u32(bars);
    const uint32_t emptyBase = smem_u32(bars + WNS);

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int x0 = blockIdx.x * WTW;
    const int R0 = blockIdx.y * segLen;
    const int R1 = min(Ho, R0 + segLen);
    const int nSteps = (R1 - R0 + WSTEP - 1) / WSTEP;
    const int span = 1 + (62 + kh) / WSR;          // stages touched by one step (3 for kh<=33)
    const int nStages = 2 * (nSteps - 1) + span;
    const int KA = kh >> 1;
    const int KB = kw >> 1;

    if (tid == 0) {
        for (int s = 0; s < WNS; ++s) {
            mbar_init(fullBase + 8 * s, 32u);
            mbar_init(emptyBase + 8 * s, (uint32_t)WNCT);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    // kernel transform U[cv][ch][a][b] (b padded to KBP, a padded to WKA_MAX), in double
    for (int idx = tid; idx < 9 * WKA_MAX * KBP; idx += WNTHREADS) {
        const int comp = idx / (WKA_MAX * KBP);
        const int rem = idx - comp * (WKA_MAX * KBP);
        const int a = rem / KBP;
        const int b = rem - a * KBP;
        const int cv = comp / 3;
        const int chh = comp - 3 * cv;
        float u = 0.f;
        if (a < KA && b < KB) {
            const float* k0 = ker + (size_t)(2 * a) * kw + 2 * b;
            const float* k1 = k0 + kw;
            const double w00 = (double)k0[0], w01 = (double)k0[1];
            const double w10 = (double)k1[0], w11 = (double)k1[1];
            const double h0 = (chh == 0) ? w00 : ((chh == 1) ? (w00 + w01) : w01);
            const double h1 = (chh == 0) ? w10 : ((chh == 1) ? (w10 + w11) : w11);
            const double uu = (cv == 0) ? h0 : ((cv == 1) ? (h0 + h1) : h1);
            u = (float)uu;
        }
        sU[idx] = u;
    }
    __syncthreads();

    // ================================================================ producer warp
    if (warp == WNCW) {
        if (vec2)
            wino_producer<KBP, true>(in, sRing, fullBase, emptyBase, H, W, x0, R0, nStages, lane);
        else
            wino_producer<KBP, false>(in, sRing, fullBase, emptyBase, H, W, x0, R0, nStages, lane);
        return;
    }

    // ================================================================ compute warps
    const int ch = warp >> 2;   // horizontal class 0..2
    const int cg = warp & 3;    // 16-block-column group
    const float* pE = sRing + (size_t)ch * PLANE + cg * 16;         // even raw rows, plane H_ch
    const float* pO = sRing + (size_t)(3 + ch) * PLANE + cg * 16;   // odd raw rows, plane H_ch
    const float* uT = sU + (size_t)(0 + ch) * (WKA_MAX * KBP);       // cv = 0
    const float* uM = sU + (size_t)(3 + ch) * (WKA_MAX * KBP);       // cv = 1
    const float* uB = sU + (size_t)(6 + ch) * (WKA_MAX * KBP);       // cv = 2
    float* zW = sZ + ch * WZCH + lane * WZP + cg * 16;
    const int ncol = min(WTW, Wo - x0);

    for (int t = 0; t < nSteps; ++t) {
        for (int s = 2 * t; s < 2 * t + span; ++s)
            mbar_wait(fullBase + 8 * (s % WNS), (uint32_t)((s / WNS) & 1));

        float accT[16], accM[16], accB[16];
#pragma unroll
        for (int c = 0; c < 16; ++c) {
            accT[c] = 0.f;
            accM[c] = 0.f;
            accB[c] = 0.f;
        }

        int e = (32 * t + lane) % WRB;   // sub-ring row of block row (32t + lane + a), a = 0
#pragma unroll 1
        for (int a = 0; a < KA; ++a) {
            int e1 = e + 1;
            if (e1 == WRB) e1 = 0;
            const float* r0 = pE + e * WPB;    // raw row 2(i+a)
            const float* r1 = pO + e * WPB;    // raw row 2(i+a)+1
            const float* r2 = pE + e1 * WPB;   // raw row 2(i+a)+2
            float T[20], Mv[20], Bv[20];
#pragma unroll
            for (int q = 0; q < 4; ++q)
                win_set(T, Mv, Bv, 4 * q, lds4(r0 + 4 * q), lds4(r1 + 4 * q), lds4(r2 + 4 * q));
            const float* wt = uT + a * KBP;
            const float* wm = uM + a * KBP;
            const float* wb = uB + a * KBP;
#pragma unroll
            for (int q = 0; q < KBP / 4; ++q) {
                win_set(T, Mv, Bv, 16, lds4(r0 + 16 + 4 * q), lds4(r1 + 16 + 4 * q),
                        lds4(r2 + 16 + 4 * q));
                const float4 ut4 = lds4(wt + 4 * q);
                const float4 um4 = lds4(wm + 4 * q);
                const float4 ub4 = lds4(wb + 4 * q);
                const float ut[4] = {ut4.x, ut4.y, ut4.z, ut4.w};
                const float um[4] = {um4.x, um4.y, um4.z, um4.w};
                const float ub[4] = {ub4.x, ub4.y, ub4.z, ub4.w};
#pragma unroll
                for (int d = 0; d < 4; ++d) {
#pragma unroll
                    for (int c = 0; c < 16; ++c) {
                        accT[c] = fmaf(T[c + d], ut[d], accT[c]);
                        accM[c] = fmaf(Mv[c + d], um[d], accM[c]);
                        accB[c] = fmaf(Bv[c + d], ub[d], accB[c]);
                    }
                }
#pragma unroll
                for (int c = 0; c < 16; ++c) {
                    T[c] = T[c + 4];
                    Mv[c] = Mv[c + 4];
                    Bv[c] = Bv[c + 4];
                }
            }
            e = e1;
        }
        // stages 2t and 2t+1 are not needed by later steps
        mbar_arrive(emptyBase + 8 * ((2 * t) % WNS));
        mbar_arrive(emptyBase + 8 * ((2 * t + 1) % WNS));

        // ---- epilogue: Z_ch[2i] = T + M, Z_ch[2i+1] = M + B
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            *reinterpret_cast<float4*>(zW + 4 * q) =
                make_float4(accT[4 * q + 0] + accM[4 * q + 0], accT[4 * q + 1] + accM[4 * q + 1],
                            accT[4 * q + 2] + accM[4 * q + 2], accT[4 * q + 3] + accM[4 * q + 3]);
            *reinterpret_cast<float4*>(zW + 32 * WZP + 4 * q) =
                make_float4(accM[4 * q + 0] + accB[4 * q + 0], accM[4 * q + 1] + accB[4 * q + 1],
                            accM[4 * q + 2] + accB[4 * q + 2], accM[4 * q + 3] + accB[4 * q + 3]);
        }
        named_bar_sync(1, WNCT);
        {
            const int orow0 = R0 + t * WSTEP;
            const int nr = min(WSTEP, R1 - orow0);
            for (int r = warp; r < nr; r += WNCW) {
                const float* zr = sZ + (r & 1) * (32 * WZP) + (r >> 1) * WZP;
                float* op = out + (size_t)(orow0 + r) * Wo + x0;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int c = 32 * k + lane;
                    if (c < ncol) {
                        const int jj = c >> 1;
                        const float zmid = zr[WZCH + jj];                          // Z_1
                        const float zside = zr[(c & 1) ? (2 * WZCH + jj) : jj];   // Z_2 / Z_0
                        op[c] = zside + zmid;
                    }
                }
            }
        }
        named_bar_sync(1, WNCT);
    }
}

// ------------------------------------------------------------------ host side
template <int KWP>
static void launch_fast(const float* in, const float* ker, float* out, int H, int W, int kh,
                        int kw, int Ho, int Wo) {
    static bool inited = false;
    static int occ = 1;
    static int nsm = 132;
    const size_t smemBytes = Cfg<KWP>::SMEM;
    if (!inited) {
        cudaFuncSetAttribute(conv2d_strip_kernel<KWP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smemBytes);
        cudaFuncSetAttribute(conv2d_strip_kernel<KWP>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        int o = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, conv2d_strip_kernel<KWP>, NTHREADS,
                                                          smemBytes) != cudaSuccess || o < 1)
            o = 1;
        occ = o;
        int dev = 0, n = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
            nsm = n;
        cudaGetLastError();
        inited = true;
    }
    const int nStrips = (Wo + TW - 1) / TW;
    const int stepsTotal = (Ho + BH - 1) / BH;
    const int target = nsm * occ;
    int nSeg = target / nStrips;
    if (nSeg < 1) nSeg = 1;
    if (nSeg > stepsTotal) nSeg = stepsTotal;
    const int stepsPerSeg = (stepsTotal + nSeg - 1) / nSeg;
    nSeg = (stepsTotal + stepsPerSeg - 1) / stepsPerSeg;

    const int bulk = ((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0) ? 1 : 0;
    dim3 grid(nStrips, nSeg);
    conv2d_strip_kernel<KWP><<<grid, NTHREADS, smemBytes>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                            stepsPerSeg, bulk);
}

// Returns false if the Winograd path cannot be used (caller falls back to c2).
template <int KBP>
static bool launch_wino(const float* in, const float* ker, float* out, int H, int W, int kh,
                        int kw, int Ho, int Wo) {
    static int state = 0;   // 0 = not initialised, 1 = usable, -1 = unusable
    static int nsm = 132;
    const size_t smemBytes = WCfg<KBP>::SMEM;
    if (state == 0) {
        const cudaError_t e1 = cudaFuncSetAttribute(
            conv2d_wino_kernel<KBP>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smemBytes);
        cudaFuncSetAttribute(conv2d_wino_kernel<KBP>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        int o = 0;
        const cudaError_t e2 = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &o, conv2d_wino_kernel<KBP>, WNTHREADS, smemBytes);
        int dev = 0, n = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
            nsm = n;
        cudaGetLastError();
        state = (e1 == cudaSuccess && e2 == cudaSuccess && o >= 1) ? 1 : -1;
    }
    if (state < 0) return false;

    const int nStrips = (Wo + WTW - 1) / WTW;
    int nSeg = nsm / nStrips;
    if (nSeg < 1) nSeg = 1;
    const int maxSeg = (Ho + 1) / 2;
    if (nSeg > maxSeg) nSeg = maxSeg;
    if (nSeg < 1) nSeg = 1;
    int segLen = (Ho + nSeg - 1) / nSeg;
    segLen = (segLen + 1) & ~1;
    nSeg = (Ho + segLen - 1) / segLen;

    const int vec2 = ((W & 1) == 0) && ((reinterpret_cast<uintptr_t>(in) & 7) == 0) ? 1 : 0;
    dim3 grid(nStrips, nSeg);
    conv2d_wino_kernel<KBP><<<grid, WNTHREADS, smemBytes>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                            segLen, vec2);
    if (cudaGetLastError() != cudaSuccess) {
        state = -1;
        return false;
    }
    return true;
}

 void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh > 0 && kw > 0 && Ho > 0 && Wo > 0) {
        bool done = false;
        if ((kh & 1) == 0 && (kw & 1) == 0 && kh >= 16 && kh <= 32 && kw >= 16 && kw <= 32) {
            const int kbp = ((kw >> 1) + 3) & ~3;
            if (kbp <= 8)
                done = launch_wino<8>(input, kernel, output, H, W, kh, kw, Ho, Wo);
            else if (kbp <= 12)
                done = launch_wino<12>(input, kernel, output, H, W, kh, kw, Ho, Wo);
            else
                done = launch_wino<16>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        }
        if (!done) {
            if (kw <= 32 && kh <= KH_MAX) {
                const int kwp = (kw + 3) & ~3;
                switch (kwp) {
                    case 4: launch_fast<4>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                    case 8: launch_fast<8>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                    case 12: launch_fast<12>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                    case 16: launch_fast<16>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                    case 20: launch_fast<20>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                    case 24: launch_fast<24>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                    case 28: launch_fast<28>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                    default: launch_fast<32>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                }
            } else {
                dim3 block(16, 16);
                dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y);
                conv_2d_naive<<<grid, block>>>(input, kernel, output, W, kh, kw, Ho, Wo);
            }
        }
    }
    cudaDeviceSynchronize();
}
}  // namespace cm_path0
#undef TW
#undef BH
#undef NS
#undef RING
#undef CC
#undef RR
#undef NCW
#undef NCT
#undef NTHREADS
#undef KH_MAX
#undef SP
#undef WTW
#undef WSTEP
#undef WNS
#undef WSR
#undef WRB
#undef WPB
#undef WZP
#undef WZCH
#undef WNCW
#undef WNCT
#undef WNTHREADS
#undef WKA_MAX

namespace cm_path1 {
// conv_2d (fp32), valid 2-D cross-correlation, Hopper (sm_90a).
// round2-c2: persistent column-strip streaming kernel with vertical F(2,2) kernel-row pairing.
//   * CTA = 4 compute warps + 1 producer warp. Each CTA owns a 128-column output strip and a
//     run of output rows (segment); it walks down in steps of BH=32 output rows.
//   * Input rows live in a 4-stage circular smem ring (stage = 32 input rows). The ring is split
//     by row parity: even rows in half 0, odd rows in half 1 (64 physical rows each), so the rows
//     2 apart read by the lanes of one quarter-warp are consecutive physical rows with pitch
//     P == 4 (mod 8) floats -> conflict-free LDS.128. Stage loads: cp.async.bulk (TMA bulk copy,
//     mbarrier complete_tx) when W%4==0 and the input is 16B-aligned, else 4B cp.async.
//   * Compute: thread = output rows (2rg, 2rg+1) x 16 columns. For each kernel-row pair
//     (2a, 2a+1) with input rows X0, X1, X2 = 2rg+2a+{0,1,2}:
//        accT += (X0-X1) (*) w[2a]
//        accM +=  X1     (*) (w[2a]+w[2a+1])
//        accB += (X2-X1) (*) w[2a+1]                 ((*) = horizontal 1-D correlation)
//     out[2rg] = accT + accM, out[2rg+1] = accM + accB.
//     An odd last kernel row is an extra pair with X1 := zero row and weights (w, 0, w):
//     accT += X0(*)w, accB += X2(*)w exactly (single-row math).
//   * Weight triples are precomputed in smem and streamed as broadcast LDS.128 (12 regs).
//   * The next pair's first 8 window columns and first weight chunk are prefetched during the
//     current pair's last chunk (register double buffering).
//   * Epilogue: per-warp 32x32 staging tile in smem, then coalesced 128B row stores.



#define TW 128            // output columns per strip
#define BH 32             // output rows per step == input rows per stage
#define NS 4              // ring stages
#define RING (NS * BH)    // ring rows (power of two)
#define HALF (RING / 2)   // physical rows per parity half
#define CC 16             // output columns per thread
#define NCW 4             // compute warps
#define NCT (NCW * 32)    // compute threads
#define NTHREADS (NCT + 32)
#define KH_MAX (2 * BH + 1)
#define NP_MAX ((KH_MAX + 1) / 2)
#define SP 36             // staging pitch (floats), == 4 mod 8
#define PF 2              // prefetched float4 chunks per row at pair boundaries

template <int KWP>
struct Cfg {
    static constexpr int NQ = KWP / 4;
    static constexpr int P = ((TW + KWP) % 8 == 0) ? (TW + KWP + 4) : (TW + KWP);
    // float offsets inside dynamic shared memory
    static constexpr int STG_OFF = RING * P;
    static constexpr int W_OFF = STG_OFF + NCW * 32 * SP;
    static constexpr int Z_OFF = W_OFF + NP_MAX * NQ * 12;
    static constexpr int Z_FLOATS = CC + KWP;
    static constexpr size_t BAR_OFF = (size_t)(Z_OFF + Z_FLOATS) * 4;
    static constexpr size_t SMEM = BAR_OFF + 2 * NS * 8;
};

// ------------------------------------------------------------------ PTX helpers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ float4 lds4(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}

// Float offsets (relative to the smem base) of the three input rows X0, X1, X2 of a kernel-row
// pair. e = (ring-relative even row of X0) / 2. Normal pair: X0 = even row e, X1 = odd row e,
// X2 = even row e+1. Tail pair (odd kh, last row alone): X0 = even row e, X1 = zero row,
// X2 = odd row e.
template <int P, int ZREL>
__device__ __forceinline__ void pair_rows(int colOff, int e, bool tail, int& o0, int& o1,
                                          int& o2) {
    const int ev = colOff + (e & (HALF - 1)) * P;
    o0 = ev;
    o1 = tail ? ZREL : (ev + HALF * P);
    o2 = tail ? (ev + HALF * P) : (colOff + ((e + 1) & (HALF - 1)) * P);
}

#define F22_PUT(i, r0, r1, r2)          \
    xT[(i) + 0] = (r0).x - (r1).x;      \
    xT[(i) + 1] = (r0).y - (r1).y;      \
    xT[(i) + 2] = (r0).z - (r1).z;      \
    xT[(i) + 3] = (r0).w - (r1).w;      \
    xM[(i) + 0] = (r1).x;               \
    xM[(i) + 1] = (r1).y;               \
    xM[(i) + 2] = (r1).z;               \
    xM[(i) + 3] = (r1).w;               \
    xB[(i) + 0] = (r2).x - (r1).x;      \
    xB[(i) + 1] = (r2).y - (r1).y;      \
    xB[(i) + 2] = (r2).z - (r1).z;      \
    xB[(i) + 3] = (r2).w - (r1).w;

// ------------------------------------------------------------------ main kernel
template <int KWP>
__global__ void __launch_bounds__(NTHREADS, 2)
conv2d_f22_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                  float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo,
                  int stepsPerSeg, int bulk) {
    using C = Cfg<KWP>;
    constexpr int P = C::P;
    constexpr int NQ = C::NQ;
    extern __shared__ __align__(128) unsigned char smem[];
    float* sF = reinterpret_cast<float*>(smem);
    float* sRing = sF;
    float* sStg = sF + C::STG_OFF;
    float* sW = sF + C::W_OFF;
    float* sZ = sF + C::Z_OFF;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + C::BAR_OFF);
    const uint32_t fullBase = smem_u32(bars);           // full[s]  = fullBase + 8*s
    const uint32_t emptyBase = smem_u32(bars + NS);     // empty[s] = emptyBase + 8*s

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int x0 = blockIdx.x * TW;
    const int R0 = blockIdx.y * stepsPerSeg * BH;
    const int R1 = min(Ho, R0 + stepsPerSeg * BH);
    const int nSteps = (R1 - R0 + BH - 1) / BH;
    const int span = 1 + (kh - 1 + BH - 1) / BH;   // stages touched by one step
    const int nStages = nSteps + span - 1;
    const int lrowFull = (TW + kw - 1 + 3) & ~3;
    const int lrow = min(lrowFull, W - x0);         // columns loaded per ring row

    // ================================================================ producer warp
    if (warp == NCW) {
        if (lane == 0) {
            for (int s = 0; s < NS; ++s) {
                mbar_init(fullBase + 8 * s, bulk ? 1u : 32u);
                mbar_init(emptyBase + 8 * s, (uint32_t)NCT);
            }
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncwarp();
        // barriers are initialised: release the compute warps (they do their setup meanwhile)
        named_bar_arrive(1, NTHREADS);

        for (int g = 0; g < nStages; ++g) {
            const int slot = g & (NS - 1);
            if (g >= NS) mbar_wait(emptyBase + 8 * slot, (uint32_t)(((g / NS) - 1) & 1));
            const int grow0 = R0 + g * BH;
            int nvalid = H - grow0;
            nvalid = nvalid < 0 ? 0 : (nvalid > BH ? BH : nvalid);
            const uint32_t fb = fullBase + 8 * slot;
            if (bulk) {
                if (lane == 0) mbar_arrive_expect_tx(fb, (uint32_t)(nvalid * lrow * 4));
                __syncwarp();
                if (lane < nvalid) {
                    float* dst =
                        sRing + ((lane & 1) * HALF + slot * (BH / 2) + (lane >> 1)) * P;
                    bulk_g2s(smem_u32(dst), in + (size_t)(grow0 + lane) * W + x0,
                             (uint32_t)(lrow * 4), fb);
                }
            } else {
                for (int r = 0; r < nvalid; ++r) {
                    const float* src = in + (size_t)(grow0 + r) * W + x0;
                    const uint32_t dst =
                        smem_u32(sRing + ((r & 1) * HALF + slot * (BH / 2) + (r >> 1)) * P);
                    for (int c = lane; c < lrow; c += 32) cp_async4(dst + 4u * c, src + c);
                }
                cp_async_mbar_arrive_noinc(fb);
            }
        }
        if (!bulk) asm volatile("cp.async.wait_all;" ::: "memory");
        return;
    }

    // ================================================================ compute warps: setup
    const int NP = (kh + 1) >> 1;   // kernel-row pairs (last one is the odd tail if kh is odd)
    {
        // ring columns never written by the loads must be finite (they meet zero weights)
        const int zw = P - lrow;
        if (zw > 0) {
            const int total = RING * zw;
            for (int i = tid; i < total; i += NCT) {
                const int r = i / zw;
                sRing[r * P + lrow + (i - r * zw)] = 0.f;
            }
        }
        for (int i = tid; i < C::Z_FLOATS; i += NCT) sZ[i] = 0.f;
        // weight triples: [pair a][chunk q][wA x4 | wS x4 | wB x4]
        for (int i = tid; i < NP * KWP; i += NCT) {
            const int a = i / KWP;
            const int n = i - a * KWP;
            const int m0 = 2 * a, m1 = 2 * a + 1;
            float wa = 0.f, ws = 0.f, wb = 0.f;
            if (n < kw) {
                wa = __ldg(ker + (size_t)m0 * kw + n);
                if (m1 < kh) {
                    wb = __ldg(ker + (size_t)m1 * kw + n);
                    ws = wa + wb;
                } else {   // tail: X1 is the zero row; accT += X0*w, accB += X2*w
                    wb = wa;
                    ws = 0.f;
                }
            }
            float* d = sW + (a * NQ + (n >> 2)) * 12 + (n & 3);
            d[0] = wa;
            d[4] = ws;
            d[8] = wb;
        }
    }
    named_bar_sync(1, NTHREADS);

    // ================================================================ compute warps: main loop
    const int cg = tid >> 4;   // column group 0..7 (16 columns each)
    const int rg = tid & 15;   // row group 0..15 (output rows 2rg, 2rg+1)
    const int colOff = CC * cg;
    float* stg = sStg + warp * (32 * SP);
    const int scol = (cg & 1) * CC;
    const int ocol = x0 + warp * 32 + lane;
    const int tailPair = (kh & 1) ? (NP - 1) : -1;

    for (int t = 0; t < nSteps; ++t) {
        for (int g = t; g < t + span; ++g)
            mbar_wait(fullBase + 8 * (g & (NS - 1)), (uint32_t)((g / NS) & 1));

        float aT[CC], aM[CC], aB[CC];
#pragma unroll
        for (int c = 0; c < CC; ++c) {
            aT[c] = 0.f;
            aM[c] = 0.f;
            aB[c] = 0.f;
        }

        const int e0 = t * (BH / 2) + rg;

        // prefetch registers (double buffer across pairs)
        float4 px0[PF], px1[PF], px2[PF];
        float4 pwa, pws, pwb;
        {
            int o0, o1, o2;
            pair_rows<P, C::Z_OFF>(colOff, e0, tailPair == 0, o0, o1, o2);
#pragma unroll
            for (int k = 0; k < PF; ++k) {
                px0[k] = lds4(sF + o0 + 4 * k);
                px1[k] = lds4(sF + o1 + 4 * k);
                px2[k] = lds4(sF + o2 + 4 * k);
            }
            pwa = lds4(sW);
            pws = lds4(sW + 4);
            pwb = lds4(sW + 8);
        }

#pragma unroll 1
        for (int a = 0; a < NP; ++a) {
            int o0, o1, o2, n0, n1, n2;
            pair_rows<P, C::Z_OFF>(colOff, e0 + a, a == tailPair, o0, o1, o2);
            pair_rows<P, C::Z_OFF>(colOff, e0 + a + 1, (a + 1) == tailPair, n0, n1, n2);
            const float* p0 = sF + o0;
            const float* p1 = sF + o1;
            const float* p2 = sF + o2;
            const float* wp = sW + a * (NQ * 12);
            const float* wn = sW + min(a + 1, NP - 1) * (NQ * 12);

            float xT[CC + 4], xM[CC + 4], xB[CC + 4];
#pragma unroll
            for (int k = 0; k < CC / 4; ++k) {
                float4 r0, r1, r2;
                if (k < PF) {
                    r0 = px0[k < PF ? k : 0];
                    r1 = px1[k < PF ? k : 0];
                    r2 = px2[k < PF ? k : 0];
                } else {
                    r0 = lds4(p0 + 4 * k);
                    r1 = lds4(p1 + 4 * k);
                    r2 = lds4(p2 + 4 * k);
                }
                F22_PUT(4 * k, r0, r1, r2)
            }

#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                {
                    const float4 r0 = lds4(p0 + CC + 4 * q);
                    const float4 r1 = lds4(p1 + CC + 4 * q);
                    const float4 r2 = lds4(p2 + CC + 4 * q);
                    F22_PUT(CC, r0, r1, r2)
                }
                float4 wa, ws, wb;
                if (q == 0) {
                    wa = pwa;
                    ws = pws;
                    wb = pwb;
                } else {
                    wa = lds4(wp + 12 * q);
                    ws = lds4(wp + 12 * q + 4);
                    wb = lds4(wp + 12 * q + 8);
                }
                if (q == NQ - 1) {   // prefetch the next pair's first chunks and weights
                    const float* m0 = sF + n0;
                    const float* m1 = sF + n1;
                    const float* m2 = sF + n2;
#pragma unroll
                    for (int k = 0; k < PF; ++k) {
                        px0[k] = lds4(m0 + 4 * k);
                        px1[k] = lds4(m1 + 4 * k);
                        px2[k] = lds4(m2 + 4 * k);
                    }
                    pwa = lds4(wn);
                    pws = lds4(wn + 4);
                    pwb = lds4(wn + 8);
                }
                const float fa[4] = {wa.x, wa.y, wa.z, wa.w};
                const float fs[4] = {ws.x, ws.y, ws.z, ws.w};
                const float fb[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                for (int d = 0; d < 4; ++d) {
#pragma unroll
                    for (int c = 0; c < CC; ++c) {
                        aT[c] = fmaf(xT[c + d], fa[d], aT[c]);
                        aM[c] = fmaf(xM[c + d], fs[d], aM[c]);
                        aB[c] = fmaf(xB[c + d], fb[d], aB[c]);
                    }
                }
#pragma unroll
                for (int c = 0; c < CC; ++c) {
                    xT[c] = xT[c + 4];
                    xM[c] = xM[c + 4];
                    xB[c] = xB[c + 4];
                }
            }
        }
        // stage t is no longer needed by this thread
        mbar_arrive(emptyBase + 8 * (t & (NS - 1)));

        // ---- epilogue: stage the warp's 32x32 tile (row 2rg -> slot rg, row 2rg+1 -> rg+16)
#pragma unroll
        for (int q = 0; q < CC / 4; ++q) {
            *reinterpret_cast<float4*>(stg + rg * SP + scol + 4 * q) =
                make_float4(aT[4 * q + 0] + aM[4 * q + 0], aT[4 * q + 1] + aM[4 * q + 1],
                            aT[4 * q + 2] + aM[4 * q + 2], aT[4 * q + 3] + aM[4 * q + 3]);
            *reinterpret_cast<float4*>(stg + (rg + 16) * SP + scol + 4 * q) =
                make_float4(aM[4 * q + 0] + aB[4 * q + 0], aM[4 * q + 1] + aB[4 * q + 1],
                            aM[4 * q + 2] + aB[4 * q + 2], aM[4 * q + 3] + aB[4 * q + 3]);
        }
        __syncwarp();
        const int orow0 = R0 + t * BH;
        if (ocol < Wo) {
            const int nr = min(BH, R1 - orow0);
            float* op = out + (size_t)orow0 * Wo + ocol;
#pragma unroll 8
            for (int r = 0; r < nr; ++r)
                op[(size_t)r * Wo] = stg[((r >> 1) + ((r & 1) << 4)) * SP + lane];
        }
        __syncwarp();
    }
}

// ------------------------------------------------------------------ generic fallback
__global__ void conv_2d_naive(const float* in, const float* ker, float* out, int W, int kh, int kw,
                              int Ho, int Wo) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < Ho && c < Wo) {
        float acc = 0.0f;
        for (int m = 0; m < kh; ++m) {
            const float* row = in + (size_t)(r + m) * W + c;
            for (int n = 0; n < kw; ++n) acc = fmaf(row[n], ker[m * kw + n], acc);
        }
        out[(size_t)r * Wo + c] = acc;
    }
}

// ------------------------------------------------------------------ host side
template <int KWP>
static void launch_fast(const float* in, const float* ker, float* out, int H, int W, int kh,
                        int kw, int Ho, int Wo) {
    static bool inited = false;
    static int occ = 1;
    static int nsm = 132;
    const size_t smemBytes = Cfg<KWP>::SMEM;
    if (!inited) {
        cudaFuncSetAttribute(conv2d_f22_kernel<KWP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smemBytes);
        cudaFuncSetAttribute(conv2d_f22_kernel<KWP>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        int o = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, conv2d_f22_kernel<KWP>, NTHREADS,
                                                          smemBytes) != cudaSuccess || o < 1)
            o = 1;
        occ = o;
        int dev = 0, n = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
            nsm = n;
        cudaGetLastError();
        inited = true;
    }
    const int nStrips = (Wo + TW - 1) / TW;
    const int stepsTotal = (Ho + BH - 1) / BH;
    const int target = nsm * occ;
    int nSeg = target / nStrips;
    if (nSeg < 1) nSeg = 1;
    if (nSeg > stepsTotal) nSeg = stepsTotal;
    const int stepsPerSeg = (stepsTotal + nSeg - 1) / nSeg;
    nSeg = (stepsTotal + stepsPerSeg - 1) / stepsPerSeg;

    const int bulk = ((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0) ? 1 : 0;
    dim3 grid(nStrips, nSeg);
    conv2d_f22_kernel<KWP><<<grid, NTHREADS, smemBytes>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                          stepsPerSeg, bulk);
}

 void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh > 0 && kw > 0 && Ho > 0 && Wo > 0) {
        if (kw <= 32 && kh <= KH_MAX) {
            const int kwp = (kw + 3) & ~3;
            switch (kwp) {
                case 4: launch_fast<4>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                case 8: launch_fast<8>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                case 12: launch_fast<12>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                case 16: launch_fast<16>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                case 20: launch_fast<20>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                case 24: launch_fast<24>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                case 28: launch_fast<28>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
                default: launch_fast<32>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            }
        } else {
            dim3 block(16, 16);
            dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y);
            conv_2d_naive<<<grid, block>>>(input, kernel, output, W, kh, kw, Ho, Wo);
        }
    }
    cudaDeviceSynchronize();
}
}  // namespace cm_path1
#undef TW
#undef BH
#undef NS
#undef RING
#undef HALF
#undef CC
#undef NCW
#undef NCT
#undef NTHREADS
#undef KH_MAX
#undef NP_MAX
#undef SP
#undef PF
#undef F22_PUT


// =================================================================================================
// cm_tc: tensor-core path. Banded-Toeplitz GEMM on wgmma (SS operands), 2-piece fp16 split.
//
//   out[r][c] = sum_m sum_u  X_m[r][16u + k] * B_{m,d}[k][j],  d = u - jb (0..ND-1),
//   B_{m,d}[k][j] = w[m][16d + k - j]  (zero outside [0, kw)).
//   x = xh + 2^-11 * xl,  w*s = wh + 2^-11 * wl  (xh, xl, wh, wl fp16; s = 2^e so max|w*s| ~ 2^14)
//   main += Xh*Bh (two accumulator sets by m parity), corr += Xh*Bl + Xl*Bh,
//   out = (main + 2^-11 * corr) / s.   (xl*wl, ~2^-22 relative, is dropped)
//
//   * CTA = 3 warpgroups: WG0/WG1 consumers (64 output columns each of a 128-column strip, same
//     64 rows per step), WG2 producer.
//   * Producer: fp32 rows -> hi/lo fp16 planes in a 4-stage ring (32 rows per stage). Layout:
//     plane (piece, 8-column group) x row x 16 B, so the wgmma A tile (64 rows x 16 k, K-major,
//     no swizzle) for kernel row m is just the descriptor start moved by m rows. Ring rows 0..31
//     are mirrored at 128..159 so no window wraps.
//   * B: per kernel row m, [Bh_0..Bh_{ND-1} | Bl_0..Bl_{ND-1}] (16 N-rows each), K-major.
//   * Per 16-column input chunk u (unrolled): n(16*NB) wgmmas for all m, commit, wait, then the
//     chunk's partial sums are flushed into FP32 totals (bounds the biased truncation error of the
//     tensor-core FP32 accumulation); a finished 16-column output block is stored.
//   * Range guard: a flag in mapped pinned host memory; if set, the FFMA paths rerun.
// =================================================================================================


namespace cm_tc {

constexpr int TC_KMIN = 12;                 // dispatch: kh, kw >= TC_KMIN (and <= 32)
constexpr long long TC_MIN_OUT = 400000LL;  // dispatch: Ho*Wo >= TC_MIN_OUT

constexpr int TC_TW = 128;                      // output columns per CTA strip
constexpr int TC_STEP = 64;                     // output rows per step (wgmma M)
constexpr int TC_SR = 32;                       // input rows per ring stage
constexpr int TC_NS = 4;                        // ring stages
constexpr int TC_RINGR = TC_NS * TC_SR;         // 128 ring rows
constexpr int TC_RTA = TC_RINGR + 32;           // + 32 mirror rows = 160 rows per plane
constexpr int TC_NCG = 20;                      // 8-column groups per ring row (160 columns)
constexpr int TC_RING_BYTES = 2 * TC_NCG * TC_RTA * 16;   // 102400
constexpr int TC_KMAX = 32;
constexpr int TC_NTHR = 384;
constexpr int TC_NCONS = 256;

template <int ND>
struct TcCfg {
    static constexpr int BSZ = ND * 1024;                    // B bytes per kernel row (hi + lo)
    static constexpr int B_OFF = TC_RING_BYTES;
    static constexpr int K_OFF = B_OFF + TC_KMAX * BSZ;      // raw kernel (floats)
    static constexpr int R_OFF = K_OFF + TC_KMAX * TC_KMAX * 4;
    static constexpr int BAR_OFF = R_OFF + 64;
    static constexpr int SMEM = BAR_OFF + 2 * TC_NS * 8;
};

// ------------------------------------------------------------------ PTX helpers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void l2_prefetch(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_wait0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// Shared-memory matrix descriptor, no swizzle. K-major: LBO = byte distance between the two
// 8-element K halves (core matrices adjacent in K), SBO = byte distance between 8-row groups.
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32);
}

__device__ __forceinline__ void wg_n16(float (&a)[8], uint64_t da, uint64_t db, uint32_t sc) {
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "setp.ne.b32 p, %10, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n\t"
        "}"
        : "+f"(a[0]), "+f"(a[1]), "+f"(a[2]), "+f"(a[3]), "+f"(a[4]), "+f"(a[5]), "+f"(a[6]),
          "+f"(a[7])
        : "l"(da), "l"(db), "r"(sc)
        : "memory");
}
__device__ __forceinline__ void wg_n32(float (&a)[8], float (&b)[8], uint64_t da, uint64_t db,
                                       uint32_t sc) {
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "setp.ne.b32 p, %18, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "%16, %17, p, 1, 1, 0, 0;\n\t"
        "}"
        : "+f"(a[0]), "+f"(a[1]), "+f"(a[2]), "+f"(a[3]), "+f"(a[4]), "+f"(a[5]), "+f"(a[6]),
          "+f"(a[7]), "+f"(b[0]), "+f"(b[1]), "+f"(b[2]), "+f"(b[3]), "+f"(b[4]), "+f"(b[5]),
          "+f"(b[6]), "+f"(b[7])
        : "l"(da), "l"(db), "r"(sc)
        : "memory");
}
__device__ __forceinline__ void wg_n48(float (&a)[8], float (&b)[8], float (&c)[8], uint64_t da,
                                       uint64_t db, uint32_t sc) {
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "setp.ne.b32 p, %26, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23}, "
        "%24, %25, p, 1, 1, 0, 0;\n\t"
        "}"
        : "+f"(a[0]), "+f"(a[1]), "+f"(a[2]), "+f"(a[3]), "+f"(a[4]), "+f"(a[5]), "+f"(a[6]),
          "+f"(a[7]), "+f"(b[0]), "+f"(b[1]), "+f"(b[2]), "+f"(b[3]), "+f"(b[4]), "+f"(b[5]),
          "+f"(b[6]), "+f"(b[7]), "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]),
          "+f"(c[5]), "+f"(c[6]), "+f"(c[7])
        : "l"(da), "l"(db), "r"(sc)
        : "memory");
}

// One wgmma over NB consecutive 16-column B blocks into d[0..NB-1].
template <int NB, int ND>
__device__ __forceinline__ void mma_nb(float (&d)[ND][8], uint64_t da, uint64_t db, uint32_t sc) {
    if constexpr (NB == 1) {
        wg_n16(d[0], da, db, sc);
    } else if constexpr (NB == 2) {
        wg_n32(d[0], d[1], da, db, sc);
    } else {
        wg_n48(d[0], d[1], d[2], da, db, sc);
    }
}

template <int ND>
__device__ __forceinline__ void fence_arr(float (&d)[ND][8]) {
#pragma unroll
    for (int i = 0; i < ND; ++i)
#pragma unroll
        for (int r = 0; r < 8; ++r) asm volatile("" : "+f"(d[i][r])::"memory");
}

__device__ __forceinline__ uint32_t pack_h2(__half a, __half b) {
    return (uint32_t)__half_as_ushort(a) | ((uint32_t)__half_as_ushort(b) << 16);
}

// x -> hi = fp16(x), lo = fp16((x - hi) * 2^11)
__device__ __forceinline__ void split8(const float (&v)[8], uint4& hi, uint4& lo) {
    uint32_t h[4], l[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const float a = v[2 * q], b = v[2 * q + 1];
        const __half ha = __float2half_rn(a);
        const __half hb = __float2half_rn(b);
        const __half la = __float2half_rn((a - __half2float(ha)) * 2048.f);
        const __half lb = __float2half_rn((b - __half2float(hb)) * 2048.f);
        h[q] = pack_h2(ha, hb);
        l[q] = pack_h2(la, lb);
    }
    hi = make_uint4(h[0], h[1], h[2], h[3]);
    lo = make_uint4(l[0], l[1], l[2], l[3]);
}

struct StepCtx {
    uint64_t aH, aL, bD;   // descriptors: A hi / A lo (chunk 0 of this WG, step row 0), B (m = 0)
    uint32_t bStep;        // B descriptor increment per kernel row (16-byte units)
    int kh;
    uint32_t e0, e1;       // empty barriers released after the step
    float* out;
    int orow0, R1, xw, Wo;
    float descale;
    int wq, lane;
};

// Chunk U (0 .. ND+2) of one step: all kernel rows, then flush and (maybe) store one block.
template <int ND, int U>
__device__ __forceinline__ void tc_chunk(float (&Ma)[ND][8], float (&Mb)[ND][8], float (&Cc)[ND][8],
                                         float (&T)[ND][8], const StepCtx& x) {
    constexpr int NU = 3 + ND;
    constexpr int DLO = (U > 3) ? (U - 3) : 0;
    constexpr int DHI = (U < ND - 1) ? U : (ND - 1);
    constexpr int NB = DHI - DLO + 1;
    const uint64_t ah = x.aH + (uint64_t)(2 * U * TC_RTA);
    const uint64_t al = x.aL + (uint64_t)(2 * U * TC_RTA);
    const uint64_t bh = x.bD + (uint64_t)(DLO * 32);          // Bh_DLO (512 B per 16-row block)
    const uint64_t bl = x.bD + (uint64_t)((ND + DLO) * 32);   // Bl_DLO
    const uint64_t bs = (uint64_t)x.bStep;
    const int kh = x.kh;

    fence_arr<ND>(Ma);
    fence_arr<ND>(Mb);
    fence_arr<ND>(Cc);
    wg_fence();
    int m = 0;
#pragma unroll 1
    for (; m + 1 < kh; m += 2) {
        const uint32_t sc = (m != 0) ? 1u : 0u;
        const uint64_t o0 = (uint64_t)m * bs;
        const uint64_t o1 = o0 + bs;
        const uint64_t m0 = (uint64_t)m;
        const uint64_t m1 = m0 + 1;
        mma_nb<NB, ND>(Ma, ah + m0, bh + o0, sc);
        mma_nb<NB, ND>(Cc, ah + m0, bl + o0, sc);
        mma_nb<NB, ND>(Cc, al + m0, bh + o0, 1u);
        mma_nb<NB, ND>(Mb, ah + m1, bh + o1, sc);
        mma_nb<NB, ND>(Cc, ah + m1, bl + o1, 1u);
        mma_nb<NB, ND>(Cc, al + m1, bh + o1, 1u);
    }
    if (m < kh) {
        const uint32_t sc = (m != 0) ? 1u : 0u;
        const uint64_t o0 = (uint64_t)m * bs;
        const uint64_t m0 = (uint64_t)m;
        mma_nb<NB, ND>(Ma, ah + m0, bh + o0, sc);
        mma_nb<NB, ND>(Cc, ah + m0, bl + o0, sc);
        mma_nb<NB, ND>(Cc, al + m0, bh + o0, 1u);
    }
    wg_commit();
    wg_wait0();
    fence_arr<ND>(Ma);
    fence_arr<ND>(Mb);
    fence_arr<ND>(Cc);

    if constexpr (U == NU - 1) {   // the ring window of this step is no longer read
        mbar_arrive(x.e0);
        mbar_arrive(x.e1);
    }

    // flush this chunk's partial sums into the FP32 block totals
    const bool useMb = kh >= 2;
#pragma unroll
    for (int i = 0; i < NB; ++i) {
        const int d = DLO + i;
        const int s = (U - d) % ND;   // slot of output block jb = U - d
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const float mm = useMb ? (Ma[i][r] + Mb[i][r]) : Ma[i][r];
            const float v = fmaf(Cc[i][r], 4.8828125e-4f, mm);   // 2^-11
            if (d == 0)
                T[s][r] = v;
            else
                T[s][r] += v;
        }
    }

    // block JB = U - (ND - 1) is complete
    if constexpr (U >= ND - 1) {
        constexpr int JB = U - (ND - 1);
        constexpr int S = JB % ND;
        const int rowA = x.orow0 + 16 * x.wq + (x.lane >> 2);
        const int colA = x.xw + 16 * JB + 2 * (x.lane & 3);
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const int row = rowA + 8 * ((r >> 1) & 1);
            const int col = colA + 8 * (r >> 2) + (r & 1);
            if (row < x.R1 && col < x.Wo) x.out[(size_t)row * x.Wo + col] = T[S][r] * x.descale;
        }
    }

    if constexpr (U + 1 < NU) tc_chunk<ND, U + 1>(Ma, Mb, Cc, T, x);
}

__device__ __forceinline__ void tc_prefetch_row(const float* in, int H, int W, int x0, int grow) {
    if (grow < H) {
        const float* rp = in + (size_t)grow * W;
        const int cEnd = min(x0 + TC_NCG * 8, W);
        for (int c = x0; c < cEnd; c += 32) l2_prefetch(rp + c);
        l2_prefetch(rp + cEnd - 1);
    }
}

// Producer warpgroup: lane = ring row inside the stage, warp pw handles column groups pw + 4j.
__device__ __forceinline__ void tc_producer(const float* __restrict__ in, unsigned char* smem,
                                            uint32_t fullB, uint32_t emptyB, int H, int W, int x0,
                                            int R0, int nStages, int vec4, int* flag, int pw,
                                            int lane) {
    uint32_t badAll = 0;
    for (int s = 0; s < 2 && s < nStages; ++s)
        tc_prefetch_row(in, H, W, x0, R0 + s * TC_SR + lane);

#pragma unroll 1
    for (int g = 0; g < nStages; ++g) {
        const int slot = g & (TC_NS - 1);
        const int grow = R0 + g * TC_SR + lane;
        const bool rv = grow < H;
        const float* rp = in + (size_t)(rv ? grow : 0) * W;
        float v[5][8];
#pragma unroll
        for (int j = 0; j < 5; ++j) {
            const int col0 = x0 + 8 * (pw + 4 * j);
            if (vec4 && rv && col0 + 8 <= W) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(rp + col0));
                const float4 b = __ldg(reinterpret_cast<const float4*>(rp + col0 + 4));
                v[j][0] = a.x;
                v[j][1] = a.y;
                v[j][2] = a.z;
                v[j][3] = a.w;
                v[j][4] = b.x;
                v[j][5] = b.y;
                v[j][6] = b.z;
                v[j][7] = b.w;
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    v[j][e] = (rv && col0 + e < W) ? __ldg(rp + col0 + e) : 0.f;
            }
        }
        if (g + 2 < nStages) tc_prefetch_row(in, H, W, x0, R0 + (g + 2) * TC_SR + lane);

        // range guard: |x| >= 2^15, inf, NaN, or a (nonzero) region max below 2^-10
        uint32_t mb = 0;
#pragma unroll
        for (int j = 0; j < 5; ++j)
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const uint32_t ab = __float_as_uint(v[j][e]) & 0x7fffffffu;
                mb = ab > mb ? ab : mb;
            }
        mb = __reduce_max_sync(0xffffffffu, mb);
        if (mb >= 0x47000000u || (mb != 0u && mb < 0x3A800000u)) badAll = 1u;

        if (g >= TC_NS) mbar_wait(emptyB + 8 * slot, (uint32_t)(((g >> 2) - 1) & 1));
        const int q = slot * TC_SR + lane;
#pragma unroll
        for (int j = 0; j < 5; ++j) {
            const int cg = pw + 4 * j;
            uint4 hi, lo;
            split8(v[j], hi, lo);
            unsigned char* ph = smem + ((size_t)cg * TC_RTA + q) * 16;
            unsigned char* pl = smem + ((size_t)(TC_NCG + cg) * TC_RTA + q) * 16;
            *reinterpret_cast<uint4*>(ph) = hi;
            *reinterpret_cast<uint4*>(pl) = lo;
            if (slot == 0) {   // mirror rows 128..159
                *reinterpret_cast<uint4*>(ph + TC_RINGR * 16) = hi;
                *reinterpret_cast<uint4*>(pl + TC_RINGR * 16) = lo;
            }
        }
        fence_proxy_async();   // generic-proxy stores -> visible to wgmma (async proxy)
        mbar_arrive(fullB + 8 * slot);
    }
    if (badAll != 0u && lane == 0) {
        *reinterpret_cast<volatile int*>(flag) = 1;
        __threadfence_system();
    }
}

template <int ND>
__global__ void __launch_bounds__(TC_NTHR, 1)
conv2d_tc_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                 float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo, int segLen,
                 int vec4, int* flag) {
    using C = TcCfg<ND>;
    extern __shared__ __align__(128) unsigned char smem[];
    float* sK = reinterpret_cast<float*>(smem + C::K_OFF);
    uint32_t* sRed = reinterpret_cast<uint32_t*>(smem + C::R_OFF);
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + C::BAR_OFF);
    const uint32_t sbase = smem_u32(smem);
    const uint32_t fullB = smem_u32(bars);
    const uint32_t emptyB = smem_u32(bars + TC_NS);

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int x0 = blockIdx.x * TC_TW;
    const int R0 = blockIdx.y * segLen;
    const int R1 = min(Ho, R0 + segLen);
    const int nSteps = (R1 - R0 + TC_STEP - 1) / TC_STEP;
    const int span = (TC_STEP + kh - 1 + TC_SR - 1) / TC_SR;   // stages touched by one step
    const int nStages = 2 * (nSteps - 1) + span;

    if (tid == 0) {
        for (int s = 0; s < TC_NS; ++s) {
            mbar_init(fullB + 8 * s, 128u);
            mbar_init(emptyB + 8 * s, (uint32_t)TC_NCONS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    // ================================================================ producer warpgroup
    if (warp >= 8) {
        tc_producer(in, smem, fullB, emptyB, H, W, x0, R0, nStages, vec4, flag, warp - 8, lane);
        return;
    }

    // ================================================================ consumers: setup
    uint32_t mxb = 0;
    for (int i = tid; i < kh * kw; i += TC_NCONS) {
        const float w = __ldg(ker + i);
        sK[i] = w;
        const uint32_t ab = __float_as_uint(w) & 0x7fffffffu;
        mxb = ab > mxb ? ab : mxb;
    }
    mxb = __reduce_max_sync(0xffffffffu, mxb);
    if (lane == 0) sRed[warp] = mxb;
    named_bar_sync(1, TC_NCONS);
    mxb = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) mxb = sRed[i] > mxb ? sRed[i] : mxb;
    int e = 0;
    bool wbad = false;
    if (mxb >= 0x7f800000u) {
        wbad = true;
    } else if (mxb != 0u) {
        const int ef = (int)(mxb >> 23);   // biased exponent of max|w|
        if (ef < 20) {
            wbad = true;
        } else {
            e = 140 - ef;   // max|w| * 2^e in [2^13, 2^14)
        }
    }
    if (wbad && tid == 0) {
        *reinterpret_cast<volatile int*>(flag) = 1;
        __threadfence_system();
    }
    const float wsc = __int_as_float((127 + e) << 23);
    const float descale = __int_as_float((127 - e) << 23);

    // B[m]: N-row nr = (piece*ND + d)*16 + j, K index k; B[k][j] = w[m][16d + k - j] * 2^e.
    {
        const int totalB = kh * ND * 128;
        unsigned char* sB = smem + C::B_OFF;
        for (int idx = tid; idx < totalB; idx += TC_NCONS) {
            const int kk = idx & 7;
            const int j = (idx >> 3) & 15;
            const int md = idx >> 7;
            const int m = md / ND;
            const int d = md - m * ND;
            const int k = 2 * kk;
            const int n0 = 16 * d + k - j;
            const float* wr = sK + m * kw;
            const float w0 = (n0 >= 0 && n0 < kw) ? wr[n0] * wsc : 0.f;
            const float w1 = (n0 + 1 >= 0 && n0 + 1 < kw) ? wr[n0 + 1] * wsc : 0.f;
            const __half h0 = __float2half_rn(w0);
            const __half h1 = __float2half_rn(w1);
            const __half l0 = __float2half_rn((w0 - __half2float(h0)) * 2048.f);
            const __half l1 = __float2half_rn((w1 - __half2float(h1)) * 2048.f);
            const int nrH = d * 16 + j;
            const int nrL = (ND + d) * 16 + j;
            const int kb = (k >> 3) * 128 + (k & 7) * 2;
            const int offH = m * C::BSZ + (nrH >> 3) * 256 + (nrH & 7) * 16 + kb;
            const int offL = m * C::BSZ + (nrL >> 3) * 256 + (nrL & 7) * 16 + kb;
            *reinterpret_cast<uint32_t*>(sB + offH) = pack_h2(h0, h1);
            *reinterpret_cast<uint32_t*>(sB + offL) = pack_h2(l0, l1);
        }
    }
    fence_proxy_async();
    named_bar_sync(1, TC_NCONS);

    // ================================================================ consumers: main loop
    const int c = warp >> 2;   // consumer warpgroup: output columns 64c .. 64c+63 of the strip
    const int wq = warp & 3;   // warp rank inside the warpgroup (rows 16wq .. 16wq+15)

    float Ma[ND][8], Mb[ND][8], Cc[ND][8], T[ND][8];
#pragma unroll
    for (int i = 0; i < ND; ++i)
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            Ma[i][r] = 0.f;
            Mb[i][r] = 0.f;
            Cc[i][r] = 0.f;
            T[i][r] = 0.f;
        }

    const uint64_t aH0 =
        make_desc(sbase + (uint32_t)(8 * c) * (uint32_t)(TC_RTA * 16), TC_RTA * 16, 128);
    const uint64_t aL0 =
        make_desc(sbase + (uint32_t)(TC_NCG + 8 * c) * (uint32_t)(TC_RTA * 16), TC_RTA * 16, 128);
    const uint64_t bD0 = make_desc(sbase + (uint32_t)C::B_OFF, 128, 256);

    StepCtx x;
    x.bD = bD0;
    x.bStep = (uint32_t)(C::BSZ >> 4);
    x.kh = kh;
    x.out = out;
    x.R1 = R1;
    x.xw = x0 + 64 * c;
    x.Wo = Wo;
    x.descale = descale;
    x.wq = wq;
    x.lane = lane;

#pragma unroll 1
    for (int t = 0; t < nSteps; ++t) {
        for (int s = 2 * t; s < 2 * t + span; ++s)
            mbar_wait(fullB + 8 * (s & (TC_NS - 1)), (uint32_t)((s >> 2) & 1));
        __syncwarp();
        const uint64_t p0 = (uint64_t)((t & 1) * TC_STEP);   // ring row of the step's first row
        x.aH = aH0 + p0;
        x.aL = aL0 + p0;
        x.orow0 = R0 + TC_STEP * t;
        x.e0 = emptyB + 8 * ((2 * t) & (TC_NS - 1));
        x.e1 = emptyB + 8 * ((2 * t + 1) & (TC_NS - 1));
        tc_chunk<ND, 0>(Ma, Mb, Cc, T, x);
    }
}

// ------------------------------------------------------------------ host side
static int* g_hflag = nullptr;
static int* g_dflag = nullptr;
static int g_flag_state = 0;

static bool tc_flag_init() {
    if (g_flag_state == 0) {
        void* p = nullptr;
        g_flag_state = -1;
        if (cudaHostAlloc(&p, 64, cudaHostAllocMapped) == cudaSuccess && p != nullptr) {
            void* dp = nullptr;
            if (cudaHostGetDevicePointer(&dp, p, 0) == cudaSuccess && dp != nullptr) {
                g_hflag = reinterpret_cast<int*>(p);
                g_dflag = reinterpret_cast<int*>(dp);
                g_flag_state = 1;
            } else {
                cudaFreeHost(p);
            }
        }
        cudaGetLastError();
    }
    return g_flag_state > 0;
}

template <int ND>
static bool tc_launch(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
                      int Ho, int Wo) {
    static int state = 0;   // 0 = not initialised, 1 = usable, -1 = unusable
    static int nsm = 132;
    constexpr int smemBytes = TcCfg<ND>::SMEM;
    if (state == 0) {
        const cudaError_t e1 = cudaFuncSetAttribute(
            conv2d_tc_kernel<ND>, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes);
        int o = 0;
        const cudaError_t e2 = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &o, conv2d_tc_kernel<ND>, TC_NTHR, smemBytes);
        int dev = 0, n = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
            nsm = n;
        cudaGetLastError();
        state = (e1 == cudaSuccess && e2 == cudaSuccess && o >= 1) ? 1 : -1;
    }
    if (state < 0) return false;

    const int nStrips = (Wo + TC_TW - 1) / TC_TW;
    const int stepsTotal = (Ho + TC_STEP - 1) / TC_STEP;
    int nSeg = nsm / nStrips;
    if (nSeg < 1) nSeg = 1;
    if (nSeg > stepsTotal) nSeg = stepsTotal;
    const int stepsPerSeg = (stepsTotal + nSeg - 1) / nSeg;
    nSeg = (stepsTotal + stepsPerSeg - 1) / stepsPerSeg;
    const int segLen = stepsPerSeg * TC_STEP;

    const int vec4 = ((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0) ? 1 : 0;
    dim3 grid(nStrips, nSeg);
    conv2d_tc_kernel<ND><<<grid, TC_NTHR, smemBytes>>>(in, ker, out, H, W, kh, kw, Ho, Wo, segLen,
                                                       vec4, g_dflag);
    if (cudaGetLastError() != cudaSuccess) {
        state = -1;
        return false;
    }
    return true;
}

// Returns true if the tensor path produced the (complete, verified-in-range) result.
static bool run(const float* input, const float* kernel, float* output, int H, int W, int kh,
                int kw) {
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (!tc_flag_init()) return false;
    volatile int* hf = g_hflag;
    *hf = 0;
    const bool launched = (kw <= 17) ? tc_launch<2>(input, kernel, output, H, W, kh, kw, Ho, Wo)
                                     : tc_launch<3>(input, kernel, output, H, W, kh, kw, Ho, Wo);
    if (!launched) {
        cudaGetLastError();
        return false;
    }
    if (cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    if (*hf != 0) return false;   // range guard tripped: caller reruns the FFMA path
    return true;
}

}  // namespace cm_tc

 void conv_2d(const float* input, const float* kernel, float* output, int input_rows, int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh >= cm_tc::TC_KMIN && kh <= cm_tc::TC_KMAX && kw >= cm_tc::TC_KMIN &&
        kw <= cm_tc::TC_KMAX && Ho > 0 && Wo > 0 &&
        (long long)Ho * (long long)Wo >= cm_tc::TC_MIN_OUT) {
        if (cm_tc::run(input, kernel, output, H, W, kh, kw)) return;
    }
    if (kernel_rows < 23) {
        cm_path1::conv_2d(input, kernel, output, input_rows, input_cols, kernel_rows, kernel_cols);
    } else {
        cm_path0::conv_2d(input, kernel, output, input_rows, input_cols, kernel_rows, kernel_cols);
    }
}
}  // namespace cm_path0
#undef TW
#undef BH
#undef NS
#undef RING
#undef CC
#undef RR
#undef NCW
#undef NCT
#undef NTHREADS
#undef KH_MAX
#undef SP
#undef WTW
#undef WSTEP
#undef WNS
#undef WSR
#undef WRB
#undef WPB
#undef WZP
#undef WZCH
#undef WNCW
#undef WNCT
#undef WNTHREADS
#undef WKA_MAX
#undef HALF
#undef NP_MAX
#undef PF
#undef F22_PUT

namespace cm_path1 {
// conv_2d (fp32), valid 2-D cross-correlation, Hopper (sm_90a) -- round3 plan 2.
//
// Paths
//  (W) Winograd-over-kernel-sub-blocks kernel (even kh, kw in [8, 32]):
//      The kernel is split into 2x2 sub-blocks (a, b); the 1-D minimal filter F(2,2)
//        data (x0,x1,x2) -> (x0-x1, x1, x2-x1), weights (w0,w1) -> (w0, w0+w1, w1),
//        outputs (m0,m1,m2) -> (m0+m1, m1+m2)
//      is nested in both directions (9 components (cv, ch)); all sums over (a, b) happen in the
//      transformed domain. 9/4 * (kh/2)*(kw/2) FMA per output instead of kh*kw.
//      * CTA = 12 compute warps (3 warpgroups) + a producer warpgroup (4 warps), one CTA per SM.
//        setmaxnreg: producers 80 registers, compute 144 (3*128*144 + 128*80 = 65536).
//        Warp w sits on scheduler w % 4: every scheduler holds 3 compute warps (the three
//        horizontal classes of one 16-block column group) and one producer warp.
//      * Producer warp p transforms raw rows r == p (mod 4) of each 32-row stage (8 rows, all
//        loads in flight at once) into 3 horizontal planes H_ch; even / odd raw rows live in
//        separate sub-rings (pitch 84 floats == 4 mod 8 -> conflict-free LDS.128).
//        Rows are L2-prefetched two stages ahead. Ring = 5 stages.
//      * Compute warp = (class ch, column group cg); lane = block row i (output rows 2i, 2i+1).
//        The vertical transform is formed on the fly from three sliding float4 windows.
//      * Epilogue per column group: the three warps of a column group (same scheduler) stage
//        their Z planes, sync on a 96-thread named barrier (id 1+cg) and store their own 32
//        output columns x 64 rows; no CTA-wide barrier, schedulers drift within the ring slack.
//      * Fallback build (1 producer warp, no setmaxnreg) is used if the 512-thread build does
//        not get exactly 128 registers at entry (e.g. under a register cap).
//  (F) round2-c2 f22 persistent column-strip kernel (vertical F(2,2) row pairing), all shapes.
//
// Dispatch: even kh >= 23 with even kw >= 16 -> W. Other even kh, kw in [8, 32]: the first calls
// of each shape alternate W and F (timed with events, 2 samples each) and the faster one is kept.
// Everything else -> F.




// =================================================================================================
// (F) f22 kernel (round2-c2, unchanged kernel code)
// =================================================================================================
namespace cm_path1 {

#define TW 128            // output columns per strip
#define BH 32             // output rows per step == input rows per stage
#define NS 4              // ring stages
#define RING (NS * BH)    // ring rows (power of two)
#define HALF (RING / 2)   // physical rows per parity half
#define CC 16             // output columns per thread
#define NCW 4             // compute warps
#define NCT (NCW * 32)    // compute threads
#define NTHREADS (NCT + 32)
#define KH_MAX (2 * BH + 1)
#define NP_MAX ((KH_MAX + 1) / 2)
#define SP 36             // staging pitch (floats), == 4 mod 8
#define PF 2              // prefetched float4 chunks per row at pair boundaries

template <int KWP>
struct Cfg {
    static constexpr int NQ = KWP / 4;
    static constexpr int P = ((TW + KWP) % 8 == 0) ? (TW + KWP + 4) : (TW + KWP);
    // float offsets inside dynamic shared memory
    static constexpr int STG_OFF = RING * P;
    static constexpr int W_OFF = STG_OFF + NCW * 32 * SP;
    static constexpr int Z_OFF = W_OFF + NP_MAX * NQ * 12;
    static constexpr int Z_FLOATS = CC + KWP;
    static constexpr size_t BAR_OFF = (size_t)(Z_OFF + Z_FLOATS) * 4;
    static constexpr size_t SMEM = BAR_OFF + 2 * NS * 8;
};

// ------------------------------------------------------------------ PTX helpers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ float4 lds4(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}

// Float offsets (relative to the smem base) of the three input rows X0, X1, X2 of a kernel-row
// pair. e = (ring-relative even row of X0) / 2. Normal pair: X0 = even row e, X1 = odd row e,
// X2 = even row e+1. Tail pair (odd kh, last row alone): X0 = even row e, X1 = zero row,
// X2 = odd row e.
template <int P, int ZREL>
__device__ __forceinline__ void pair_rows(int colOff, int e, bool tail, int& o0, int& o1,
                                          int& o2) {
    const int ev = colOff + (e & (HALF - 1)) * P;
    o0 = ev;
    o1 = tail ? ZREL : (ev + HALF * P);
    o2 = tail ? (ev + HALF * P) : (colOff + ((e + 1) & (HALF - 1)) * P);
}

#define F22_PUT(i, r0, r1, r2)          \
    xT[(i) + 0] = (r0).x - (r1).x;      \
    xT[(i) + 1] = (r0).y - (r1).y;      \
    xT[(i) + 2] = (r0).z - (r1).z;      \
    xT[(i) + 3] = (r0).w - (r1).w;      \
    xM[(i) + 0] = (r1).x;               \
    xM[(i) + 1] = (r1).y;               \
    xM[(i) + 2] = (r1).z;               \
    xM[(i) + 3] = (r1).w;               \
    xB[(i) + 0] = (r2).x - (r1).x;      \
    xB[(i) + 1] = (r2).y - (r1).y;      \
    xB[(i) + 2] = (r2).z - (r1).z;      \
    xB[(i) + 3] = (r2).w - (r1).w;

// ------------------------------------------------------------------ main kernel
template <int KWP>
__global__ void __launch_bounds__(NTHREADS, 2)
conv2d_f22_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                  float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo,
                  int stepsPerSeg, int bulk) {
    using C = Cfg<KWP>;
    constexpr int P = C::P;
    constexpr int NQ = C::NQ;
    extern __shared__ __align__(128) unsigned char smem[];
    float* sF = reinterpret_cast<float*>(smem);
    float* sRing = sF;
    float* sStg = sF + C::STG_OFF;
    float* sW = sF + C::W_OFF;
    float* sZ = sF + C::Z_OFF;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + C::BAR_OFF);
    const uint32_t fullBase = smem_u32(bars);           // full[s]  = fullBase + 8*s
    const uint32_t emptyBase = smem_u32(bars + NS);     // empty[s] = emptyBase + 8*s

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int x0 = blockIdx.x * TW;
    const int R0 = blockIdx.y * stepsPerSeg * BH;
    const int R1 = min(Ho, R0 + stepsPerSeg * BH);
    const int nSteps = (R1 - R0 + BH - 1) / BH;
    const int span = 1 + (kh - 1 + BH - 1) / BH;   // stages touched by one step
    const int nStages = nSteps + span - 1;
    const int lrowFull = (TW + kw - 1 + 3) & ~3;
    const int lrow = min(lrowFull, W - x0);         // columns loaded per ring row

    // ================================================================ producer warp
    if (warp == NCW) {
        if (lane == 0) {
            for (int s = 0; s < NS; ++s) {
                mbar_init(fullBase + 8 * s, bulk ? 1u : 32u);
                mbar_init(emptyBase + 8 * s, (uint32_t)NCT);
            }
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncwarp();
        // barriers are initialised: release the compute warps (they do their setup meanwhile)
        named_bar_arrive(1, NTHREADS);

        for (int g = 0; g < nStages; ++g) {
            const int slot = g & (NS - 1);
            if (g >= NS) mbar_wait(emptyBase + 8 * slot, (uint32_t)(((g / NS) - 1) & 1));
            const int grow0 = R0 + g * BH;
            int nvalid = H - grow0;
            nvalid = nvalid < 0 ? 0 : (nvalid > BH ? BH : nvalid);
            const uint32_t fb = fullBase + 8 * slot;
            if (bulk) {
                if (lane == 0) mbar_arrive_expect_tx(fb, (uint32_t)(nvalid * lrow * 4));
                __syncwarp();
                if (lane < nvalid) {
                    float* dst =
                        sRing + ((lane & 1) * HALF + slot * (BH / 2) + (lane >> 1)) * P;
                    bulk_g2s(smem_u32(dst), in + (size_t)(grow0 + lane) * W + x0,
                             (uint32_t)(lrow * 4), fb);
                }
            } else {
                for (int r = 0; r < nvalid; ++r) {
                    const float* src = in + (size_t)(grow0 + r) * W + x0;
                    const uint32_t dst =
                        smem_u32(sRing + ((r & 1) * HALF + slot * (BH / 2) + (r >> 1)) * P);
                    for (int c = lane; c < lrow; c += 32) cp_async4(dst + 4u * c, src + c);
                }
                cp_async_mbar_arrive_noinc(fb);
            }
        }
        if (!bulk) asm volatile("cp.async.wait_all;" ::: "memory");
        return;
    }

    // ================================================================ compute warps: setup
    const int NP = (kh + 1) >> 1;   // kernel-row pairs (last one is the odd tail if kh is odd)
    {
        // ring columns never written by the loads must be finite (they meet zero weights)
        const int zw = P - lrow;
        if (zw > 0) {
            const int total = RING * zw;
            for (int i = tid; i < total; i += NCT) {
                const int r = i / zw;
                sRing[r * P + lrow + (i - r * zw)] = 0.f;
            }
        }
        for (int i = tid; i < C::Z_FLOATS; i += NCT) sZ[i] = 0.f;
        // weight triples: [pair a][chunk q][wA x4 | wS x4 | wB x4]
        for (int i = tid; i < NP * KWP; i += NCT) {
            const int a = i / KWP;
            const int n = i - a * KWP;
            const int m0 = 2 * a, m1 = 2 * a + 1;
            float wa = 0.f, ws = 0.f, wb = 0.f;
            if (n < kw) {
                wa = __ldg(ker + (size_t)m0 * kw + n);
                if (m1 < kh) {
                    wb = __ldg(ker + (size_t)m1 * kw + n);
                    ws = wa + wb;
                } else {   // tail: X1 is the zero row; accT += X0*w, accB += X2*w
                    wb = wa;
                    ws = 0.f;
                }
            }
            float* d = sW + (a * NQ + (n >> 2)) * 12 + (n & 3);
            d[0] = wa;
            d[4] = ws;
            d[8] = wb;
        }
    }
    named_bar_sync(1, NTHREADS);

    // ================================================================ compute warps: main loop
    const int cg = tid >> 4;   // column group 0..7 (16 columns each)
    const int rg = tid & 15;   // row group 0..15 (output rows 2rg, 2rg+1)
    const int colOff = CC * cg;
    float* stg = sStg + warp * (32 * SP);
    const int scol = (cg & 1) * CC;
    const int ocol = x0 + warp * 32 + lane;
    const int tailPair = (kh & 1) ? (NP - 1) : -1;

    for (int t = 0; t < nSteps; ++t) {
        for (int g = t; g < t + span; ++g)
            mbar_wait(fullBase + 8 * (g & (NS - 1)), (uint32_t)((g / NS) & 1));

        float aT[CC], aM[CC], aB[CC];
#pragma unroll
        for (int c = 0; c < CC; ++c) {
            aT[c] = 0.f;
            aM[c] = 0.f;
            aB[c] = 0.f;
        }

        const int e0 = t * (BH / 2) + rg;

        // prefetch registers (double buffer across pairs)
        float4 px0[PF], px1[PF], px2[PF];
        float4 pwa, pws, pwb;
        {
            int o0, o1, o2;
            pair_rows<P, C::Z_OFF>(colOff, e0, tailPair == 0, o0, o1, o2);
#pragma unroll
            for (int k = 0; k < PF; ++k) {
                px0[k] = lds4(sF + o0 + 4 * k);
                px1[k] = lds4(sF + o1 + 4 * k);
                px2[k] = lds4(sF + o2 + 4 * k);
            }
            pwa = lds4(sW);
            pws = lds4(sW + 4);
            pwb = lds4(sW + 8);
        }

#pragma unroll 1
        for (int a = 0; a < NP; ++a) {
            int o0, o1, o2, n0, n1, n2;
            pair_rows<P, C::Z_OFF>(colOff, e0 + a, a == tailPair, o0, o1, o2);
            pair_rows<P, C::Z_OFF>(colOff, e0 + a + 1, (a + 1) == tailPair, n0, n1, n2);
            const float* p0 = sF + o0;
            const float* p1 = sF + o1;
            const float* p2 = sF + o2;
            const float* wp = sW + a * (NQ * 12);
            const float* wn = sW + min(a + 1, NP - 1) * (NQ * 12);

            float xT[CC + 4], xM[CC + 4], xB[CC + 4];
#pragma unroll
            for (int k = 0; k < CC / 4; ++k) {
                float4 r0, r1, r2;
                if (k < PF) {
                    r0 = px0[k < PF ? k : 0];
                    r1 = px1[k < PF ? k : 0];
                    r2 = px2[k < PF ? k : 0];
                } else {
                    r0 = lds4(p0 + 4 * k);
                    r1 = lds4(p1 + 4 * k);
                    r2 = lds4(p2 + 4 * k);
                }
                F22_PUT(4 * k, r0, r1, r2)
            }

#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                {
                    const float4 r0 = lds4(p0 + CC + 4 * q);
                    const float4 r1 = lds4(p1 + CC + 4 * q);
                    const float4 r2 = lds4(p2 + CC + 4 * q);
                    F22_PUT(CC, r0, r1, r2)
                }
                float4 wa, ws, wb;
                if (q == 0) {
                    wa = pwa;
                    ws = pws;
                    wb = pwb;
                } else {
                    wa = lds4(wp + 12 * q);
                    ws = lds4(wp + 12 * q + 4);
                    wb = lds4(wp + 12 * q + 8);
                }
                if (q == NQ - 1) {   // prefetch the next pair's first chunks and weights
                    const float* m0 = sF + n0;
                    const float* m1 = sF + n1;
                    const float* m2 = sF + n2;
#pragma unroll
                    for (int k = 0; k < PF; ++k) {
                        px0[k] = lds4(m0 + 4 * k);
                        px1[k] = lds4(m1 + 4 * k);
                        px2[k] = lds4(m2 + 4 * k);
                    }
                    pwa = lds4(wn);
                    pws = lds4(wn + 4);
                    pwb = lds4(wn + 8);
                }
                const float fa[4] = {wa.x, wa.y, wa.z, wa.w};
                const float fs[4] = {ws.x, ws.y, ws.z, ws.w};
                const float fb[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                for (int d = 0; d < 4; ++d) {
#pragma unroll
                    for (int c = 0; c < CC; ++c) {
                        aT[c] = fmaf(xT[c + d], fa[d], aT[c]);
                        aM[c] = fmaf(xM[c + d], fs[d], aM[c]);
                        aB[c] = fmaf(xB[c + d], fb[d], aB[c]);
                    }
                }
#pragma unroll
                for (int c = 0; c < CC; ++c) {
                    xT[c] = xT[c + 4];
                    xM[c] = xM[c + 4];
                    xB[c] = xB[c + 4];
                }
            }
        }
        // stage t is no longer needed by this thread
        mbar_arrive(emptyBase + 8 * (t & (NS - 1)));

        // ---- epilogue: stage the warp's 32x32 tile (row 2rg -> slot rg, row 2rg+1 -> rg+16)
#pragma unroll
        for (int q = 0; q < CC / 4; ++q) {
            *reinterpret_cast<float4*>(stg + rg * SP + scol + 4 * q) =
                make_float4(aT[4 * q + 0] + aM[4 * q + 0], aT[4 * q + 1] + aM[4 * q + 1],
                            aT[4 * q + 2] + aM[4 * q + 2], aT[4 * q + 3] + aM[4 * q + 3]);
            *reinterpret_cast<float4*>(stg + (rg + 16) * SP + scol + 4 * q) =
                make_float4(aM[4 * q + 0] + aB[4 * q + 0], aM[4 * q + 1] + aB[4 * q + 1],
                            aM[4 * q + 2] + aB[4 * q + 2], aM[4 * q + 3] + aB[4 * q + 3]);
        }
        __syncwarp();
        const int orow0 = R0 + t * BH;
        if (ocol < Wo) {
            const int nr = min(BH, R1 - orow0);
            float* op = out + (size_t)orow0 * Wo + ocol;
#pragma unroll 8
            for (int r = 0; r < nr; ++r)
                op[(size_t)r * Wo] = stg[((r >> 1) + ((r & 1) << 4)) * SP + lane];
        }
        __syncwarp();
    }
}

// ------------------------------------------------------------------ generic fallback
__global__ void conv_2d_naive(const float* in, const float* ker, float* out, int W, int kh, int kw,
                              int Ho, int Wo) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < Ho && c < Wo) {
        float acc = 0.0f;
        for (int m = 0; m < kh; ++m) {
            const float* row = in + (size_t)(r + m) * W + c;
            for (int n = 0; n < kw; ++n) acc = fmaf(row[n], ker[m * kw + n], acc);
        }
        out[(size_t)r * Wo + c] = acc;
    }
}

// ------------------------------------------------------------------ host side
static int f22_nsm() {
    static int nsm = 0;
    if (nsm == 0) {
        int dev = 0, n = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
            nsm = n;
        else
            nsm = 132;
        cudaGetLastError();
    }
    return nsm;
}

// one-time per-instantiation setup; returns the occupancy (CTAs per SM)
template <int KWP>
static int f22_occ() {
    static int occ = 0;
    if (occ == 0) {
        const size_t smemBytes = Cfg<KWP>::SMEM;
        cudaFuncSetAttribute(conv2d_f22_kernel<KWP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smemBytes);
        cudaFuncSetAttribute(conv2d_f22_kernel<KWP>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        int o = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, conv2d_f22_kernel<KWP>, NTHREADS,
                                                          smemBytes) != cudaSuccess || o < 1)
            o = 1;
        occ = o;
        cudaGetLastError();
    }
    return occ;
}

template <int KWP>
static void launch_fast(const float* in, const float* ker, float* out, int H, int W, int kh,
                        int kw, int Ho, int Wo) {
    const size_t smemBytes = Cfg<KWP>::SMEM;
    const int occ = f22_occ<KWP>();
    const int nsm = f22_nsm();
    const int nStrips = (Wo + TW - 1) / TW;
    const int stepsTotal = (Ho + BH - 1) / BH;
    const int target = nsm * occ;
    int nSeg = target / nStrips;
    if (nSeg < 1) nSeg = 1;
    if (nSeg > stepsTotal) nSeg = stepsTotal;
    const int stepsPerSeg = (stepsTotal + nSeg - 1) / nSeg;
    nSeg = (stepsTotal + stepsPerSeg - 1) / stepsPerSeg;

    const int bulk = ((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0) ? 1 : 0;
    dim3 grid(nStrips, nSeg);
    conv2d_f22_kernel<KWP><<<grid, NTHREADS, smemBytes>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                          stepsPerSeg, bulk);
}

// host-side setup only (used before a timed tuning launch)
static void prepare(int kh, int kw) {
    f22_nsm();
    if (kw <= 32 && kh <= KH_MAX) {
        const int kwp = (kw + 3) & ~3;
        switch (kwp) {
            case 4: f22_occ<4>(); break;
            case 8: f22_occ<8>(); break;
            case 12: f22_occ<12>(); break;
            case 16: f22_occ<16>(); break;
            case 20: f22_occ<20>(); break;
            case 24: f22_occ<24>(); break;
            case 28: f22_occ<28>(); break;
            default: f22_occ<32>(); break;
        }
    }
}

// launches the f22 path (or the naive fallback); no synchronisation
static void run(const float* input, const float* kernel, float* output, int H, int W, int kh,
                int kw, int Ho, int Wo) {
    if (kw <= 32 && kh <= KH_MAX) {
        const int kwp = (kw + 3) & ~3;
        switch (kwp) {
            case 4: launch_fast<4>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            case 8: launch_fast<8>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            case 12: launch_fast<12>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            case 16: launch_fast<16>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            case 20: launch_fast<20>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            case 24: launch_fast<24>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            case 28: launch_fast<28>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
            default: launch_fast<32>(input, kernel, output, H, W, kh, kw, Ho, Wo); break;
        }
    } else {
        dim3 block(16, 16);
        dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y);
        conv_2d_naive<<<grid, block>>>(input, kernel, output, W, kh, kw, Ho, Wo);
    }
}
}  // namespace cm_path1
#undef TW
#undef BH
#undef NS
#undef RING
#undef HALF
#undef CC
#undef NCW
#undef NCT
#undef NTHREADS
#undef KH_MAX
#undef NP_MAX
#undef SP
#undef PF
#undef F22_PUT

// =================================================================================================
// (W) Winograd F(2x2,2x2) over kernel sub-blocks, warp-specialised (4 producer warps)
// =================================================================================================
namespace cm_wino {

constexpr int WTW = 128;                   // output columns per strip (64 block columns)
constexpr int WSTEP = 64;                  // output rows per step (32 block rows)
constexpr int WNS = 5;                     // ring stages
constexpr int WSR = 32;                    // raw input rows per stage (16 even + 16 odd)
constexpr int WRB = WNS * WSR / 2;         // rows per sub-ring (80)
constexpr int WPB = 84;                    // plane pitch in floats (== 4 mod 8)
constexpr int WZP = 68;                    // Z staging pitch in floats (== 4 mod 8)
constexpr int WZCH = 2 * 32 * WZP + 8;     // Z staging floats per class; 2*WZCH == 16 (mod 32)
constexpr int WNCW = 12;                   // compute warps (3 classes x 4 column groups)
constexpr int WNCT = WNCW * 32;            // compute threads
constexpr int WKA_MAX = 16;                // max kernel block rows (kh <= 32)
constexpr int WPLANE = WRB * WPB;          // floats per plane
constexpr int WRPG = 8;                    // raw rows per producer load group
constexpr int REG_PROD = 80;               // producer warpgroup registers (setmaxnreg)
constexpr int REG_COMP = 144;              // compute warpgroups registers (setmaxnreg)

template <int KBP>
struct WCfg {
    static constexpr size_t RING_BYTES = (size_t)2 * 3 * WPLANE * 4;      // 161280
    static constexpr size_t Z_BYTES = (size_t)3 * WZCH * 4;               // 52320
    static constexpr size_t U_BYTES = (size_t)9 * WKA_MAX * KBP * 4;      // <= 9216
    static constexpr size_t Z_OFF = RING_BYTES;
    static constexpr size_t U_OFF = Z_OFF + Z_BYTES;
    static constexpr size_t BAR_OFF = U_OFF + U_BYTES;
    static constexpr size_t SMEM = BAR_OFF + 2 * WNS * 8;
};

// ------------------------------------------------------------------ PTX helpers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void l2_prefetch(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
__device__ __forceinline__ float4 lds4(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}

// register re-balancing between warpgroups (only for the 4-producer-warp build)
template <int NPW>
struct WReg {
    static __device__ __forceinline__ void producer() {}
    static __device__ __forceinline__ void consumer() {}
};
template <>
struct WReg<4> {
    static __device__ __forceinline__ void producer() {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REG_PROD));
    }
    static __device__ __forceinline__ void consumer() {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REG_COMP));
    }
};

__device__ __forceinline__ void wino_prefetch_row(const float* in, int H, int W, int x0, int grow,
                                                  int pcols, int c0, int cstep, bool tail) {
    if (grow < H) {
        const float* rp = in + (size_t)grow * W + x0;
        for (int c = c0; c < pcols; c += cstep) l2_prefetch(rp + c);
        if (tail) l2_prefetch(rp + pcols - 1);
    }
}

// Producer / horizontal-transform warp p of NPW.
// Stage s holds raw rows R0 + 32s + r (r < 32); warp p handles the rows r == p (mod NPW), in
// groups of WRPG rows whose loads are all in flight together. Raw row r goes to sub-ring (r & 1),
// row slot*16 + (r >> 1); block column v gets H0 = x[2v]-x[2v+1], H1 = x[2v+1],
// H2 = x[2v+2]-x[2v+1] (x relative to column x0; zero outside the image).
template <int KBP, int NPW, bool V2>
__device__ __forceinline__ void wino_producer(const float* __restrict__ in, float* sRing,
                                              uint32_t fullBase, uint32_t emptyBase, int H, int W,
                                              int x0, int R0, int nStages, int p, int lane) {
    constexpr int NVB = 64 + KBP;               // block columns read by the compute warps
    constexpr int NG = WSR / (WRPG * NPW);      // load groups per stage and warp
    const int pcols = min(2 * NVB + 1, W - x0);
    // L2 prefetch mapping: this warp's rows, NPW lanes per row
    const int pfRow = NPW * (lane / NPW) + p;
    const int pfSub = lane % NPW;
    const int pfC0 = pfSub * 32;
    const bool pfTail = (pfSub == NPW - 1);

    for (int s = 0; s < 2 && s < nStages; ++s)
        wino_prefetch_row(in, H, W, x0, R0 + s * WSR + pfRow, pcols, pfC0, 32 * NPW, pfTail);

#pragma unroll 1
    for (int s = 0; s < nStages; ++s) {
        const int slot = s % WNS;
        if (s + 2 < nStages)
            wino_prefetch_row(in, H, W, x0, R0 + (s + 2) * WSR + pfRow, pcols, pfC0, 32 * NPW,
                              pfTail);

#pragma unroll 1
        for (int g = 0; g < NG; ++g) {
            float av[WRPG][3], bv[WRPG][3];
#pragma unroll
            for (int rr = 0; rr < WRPG; ++rr) {
                const int r = NPW * (WRPG * g + rr) + p;   // raw row within the stage
                const int grow = R0 + s * WSR + r;
                const bool rv = grow < H;
                const float* rp = in + (size_t)(rv ? grow : 0) * W + x0;
#pragma unroll
                for (int k = 0; k < 3; ++k) {
                    const int v = 32 * k + lane;
                    const int lc = 2 * v;
                    float a = 0.f, b = 0.f;
                    if (V2) {
                        if (rv && v <= NVB && x0 + lc < W) {
                            const float2 tv = __ldg(reinterpret_cast<const float2*>(rp + lc));
                            a = tv.x;
                            b = tv.y;
                        }
                    } else {
                        if (rv && v <= NVB && x0 + lc < W) a = __ldg(rp + lc);
                        if (rv && v < NVB && x0 + lc + 1 < W) b = __ldg(rp + lc + 1);
                    }
                    av[rr][k] = a;
                    bv[rr][k] = b;
                }
            }
            // the slot must be free before we overwrite it (loads above are already in flight)
            if (g == 0 && s >= WNS)
                mbar_wait(emptyBase + 8 * slot, (uint32_t)(((s / WNS) - 1) & 1));
#pragma unroll
            for (int rr = 0; rr < WRPG; ++rr) {
                const int r = NPW * (WRPG * g + rr) + p;
                float* dst =
                    sRing + (size_t)((r & 1) * 3) * WPLANE + (slot * 16 + (r >> 1)) * WPB;
#pragma unroll
                for (int k = 0; k < 3; ++k) {
                    const int v = 32 * k + lane;
                    float c = __shfl_down_sync(0xffffffffu, av[rr][k], 1);
                    if (k < 2) {
                        const float cn =
                            __shfl_sync(0xffffffffu, av[rr][(k + 1 < 3) ? (k + 1) : 2], 0);
                        if (lane == 31) c = cn;
                    } else {
                        if (lane == 31) c = 0.f;
                    }
                    if (v < NVB) {
                        const float b = bv[rr][k];
                        dst[v] = av[rr][k] - b;
                        dst[WPLANE + v] = b;
                        dst[2 * WPLANE + v] = c - b;
                    }
                }
            }
        }
        __syncwarp();
        mbar_arrive(fullBase + 8 * slot);   // count = 32 * NPW (every producer lane)
    }
}

__device__ __forceinline__ void win_set(float (&T)[20], float (&M)[20], float (&B)[20], int o,
                                        const float4 p0, const float4 p1, const float4 p2) {
    T[o + 0] = p0.x - p1.x;
    T[o + 1] = p0.y - p1.y;
    T[o + 2] = p0.z - p1.z;
    T[o + 3] = p0.w - p1.w;
    M[o + 0] = p1.x;
    M[o + 1] = p1.y;
    M[o + 2] = p1.z;
    M[o + 3] = p1.w;
    B[o + 0] = p2.x - p1.x;
    B[o + 1] = p2.y - p1.y;
    B[o + 2] = p2.z - p1.z;
    B[o + 3] = p2.w - p1.w;
}

template <int KBP, int NPW>
__global__ void __launch_bounds__((WNCW + NPW) * 32, 1)
conv2d_wino_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                   float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo,
                   int segLen, int vec2) {
    constexpr int NT = (WNCW + NPW) * 32;
    extern __shared__ __align__(128) unsigned char wsmem[];
    float* sRing = reinterpret_cast<float*>(wsmem);
    float* sZ = reinterpret_cast<float*>(wsmem + WCfg<KBP>::Z_OFF);
    float* sU = reinterpret_cast<float*>(wsmem + WCfg<KBP>::U_OFF);
    uint64_t* bars = reinterpret_cast<uint64_t*>(wsmem + WCfg<KBP>::BAR_OFF);
    const uint32_t fullBase = smem_u32(bars);
    const uint32_t emptyBase = smem_u32(bars + WNS);

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int x0 = blockIdx.x * WTW;
    const int R0 = blockIdx.y * segLen;
    const int R1 = min(Ho, R0 + segLen);
    const int nSteps = (R1 - R0 + WSTEP - 1) / WSTEP;
    const int span = 1 + (62 + kh) / WSR;          // stages touched by one step (3 for kh<=33)
    const int nStages = 2 * (nSteps - 1) + span;
    const int KA = kh >> 1;
    const int KB = kw >> 1;

    if (tid == 0) {
        for (int s = 0; s < WNS; ++s) {
            mbar_init(fullBase + 8 * s, (uint32_t)(32 * NPW));
            mbar_init(emptyBase + 8 * s, (uint32_t)WNCT);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    // kernel transform U[cv][ch][a][b] (b padded to KBP, a padded to WKA_MAX), in double
    for (int idx = tid; idx < 9 * WKA_MAX * KBP; idx += NT) {
        const int comp = idx / (WKA_MAX * KBP);
        const int rem = idx - comp * (WKA_MAX * KBP);
        const int a = rem / KBP;
        const int b = rem - a * KBP;
        const int cv = comp / 3;
        const int chh = comp - 3 * cv;
        float u = 0.f;
        if (a < KA && b < KB) {
            const float* k0 = ker + (size_t)(2 * a) * kw + 2 * b;
            const float* k1 = k0 + kw;
            const double w00 = (double)k0[0], w01 = (double)k0[1];
            const double w10 = (double)k1[0], w11 = (double)k1[1];
            const double h0 = (chh == 0) ? w00 : ((chh == 1) ? (w00 + w01) : w01);
            const double h1 = (chh == 0) ? w10 : ((chh == 1) ? (w10 + w11) : w11);
            const double uu = (cv == 0) ? h0 : ((cv == 1) ? (h0 + h1) : h1);
            u = (float)uu;
        }
        sU[idx] = u;
    }
    __syncthreads();

    // ================================================================ producer warpgroup
    if (warp >= WNCW) {
        WReg<NPW>::producer();
        const int p = warp - WNCW;
        if (vec2)
            wino_producer<KBP, NPW, true>(in, sRing, fullBase, emptyBase, H, W, x0, R0, nStages,
                                          p, lane);
        else
            wino_producer<KBP, NPW, false>(in, sRing, fullBase, emptyBase, H, W, x0, R0, nStages,
                                           p, lane);
        return;
    }

    // ================================================================ compute warpgroups
    WReg<NPW>::consumer();
    const int ch = warp >> 2;   // horizontal class 0..2
    const int cg = warp & 3;    // 16-block-column group (== scheduler of this warp)
    const float* pE = sRing + (size_t)ch * WPLANE + cg * 16;         // even raw rows, plane H_ch
    const float* pO = sRing + (size_t)(3 + ch) * WPLANE + cg * 16;   // odd raw rows, plane H_ch
    const float* uT = sU + (size_t)(0 + ch) * (WKA_MAX * KBP);       // cv = 0
    const float* uM = sU + (size_t)(3 + ch) * (WKA_MAX * KBP);       // cv = 1
    const float* uB = sU + (size_t)(6 + ch) * (WKA_MAX * KBP);       // cv = 2
    float* zW = sZ + ch * WZCH + lane * WZP + cg * 16;
    const int ncol = min(WTW, Wo - x0);
    // epilogue: this lane stores column 32*cg + lane of the strip
    const int ecol = 32 * cg + lane;
    const int ejj = ecol >> 1;
    const uint32_t barId = (uint32_t)(1 + cg);

    for (int t = 0; t < nSteps; ++t) {
        for (int s = 2 * t; s < 2 * t + span; ++s)
            mbar_wait(fullBase + 8 * (s % WNS), (uint32_t)((s / WNS) & 1));

        float accT[16], accM[16], accB[16];
#pragma unroll
        for (int c = 0; c < 16; ++c) {
            accT[c] = 0.f;
            accM[c] = 0.f;
            accB[c] = 0.f;
        }

        int e = (32 * t + lane) % WRB;   // sub-ring row of block row (32t + lane + a), a = 0
#pragma unroll 1
        for (int a = 0; a < KA; ++a) {
            int e1 = e + 1;
            if (e1 == WRB) e1 = 0;
            const float* r0 = pE + e * WPB;    // raw row 2(i+a)
            const float* r1 = pO + e * WPB;    // raw row 2(i+a)+1
            const float* r2 = pE + e1 * WPB;   // raw row 2(i+a)+2
            float T[20], Mv[20], Bv[20];
#pragma unroll
            for (int q = 0; q < 4; ++q)
                win_set(T, Mv, Bv, 4 * q, lds4(r0 + 4 * q), lds4(r1 + 4 * q), lds4(r2 + 4 * q));
            const float* wt = uT + a * KBP;
            const float* wm = uM + a * KBP;
            const float* wb = uB + a * KBP;
#pragma unroll
            for (int q = 0; q < KBP / 4; ++q) {
                win_set(T, Mv, Bv, 16, lds4(r0 + 16 + 4 * q), lds4(r1 + 16 + 4 * q),
                        lds4(r2 + 16 + 4 * q));
                const float4 ut4 = lds4(wt + 4 * q);
                const float4 um4 = lds4(wm + 4 * q);
                const float4 ub4 = lds4(wb + 4 * q);
                const float ut[4] = {ut4.x, ut4.y, ut4.z, ut4.w};
                const float um[4] = {um4.x, um4.y, um4.z, um4.w};
                const float ub[4] = {ub4.x, ub4.y, ub4.z, ub4.w};
#pragma unroll
                for (int d = 0; d < 4; ++d) {
#pragma unroll
                    for (int c = 0; c < 16; ++c) {
                        accT[c] = fmaf(T[c + d], ut[d], accT[c]);
                        accM[c] = fmaf(Mv[c + d], um[d], accM[c]);
                        accB[c] = fmaf(Bv[c + d], ub[d], accB[c]);
                    }
                }
#pragma unroll
                for (int c = 0; c < 16; ++c) {
                    T[c] = T[c + 4];
                    Mv[c] = Mv[c + 4];
                    Bv[c] = Bv[c + 4];
                }
            }
            e = e1;
        }
        // stages 2t and 2t+1 are not needed by later steps
        mbar_arrive(emptyBase + 8 * ((2 * t) % WNS));
        mbar_arrive(emptyBase + 8 * ((2 * t + 1) % WNS));

        // ---- epilogue (per column group): Z_ch[2i] = T + M, Z_ch[2i+1] = M + B
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            *reinterpret_cast<float4*>(zW + 4 * q) =
                make_float4(accT[4 * q + 0] + accM[4 * q + 0], accT[4 * q + 1] + accM[4 * q + 1],
                            accT[4 * q + 2] + accM[4 * q + 2], accT[4 * q + 3] + accM[4 * q + 3]);
            *reinterpret_cast<float4*>(zW + 32 * WZP + 4 * q) =
                make_float4(accM[4 * q + 0] + accB[4 * q + 0], accM[4 * q + 1] + accB[4 * q + 1],
                            accM[4 * q + 2] + accB[4 * q + 2], accM[4 * q + 3] + accB[4 * q + 3]);
        }
        // the three class warps of this column group (all on one scheduler)
        named_bar_sync(barId, 96u);
        if (ecol < ncol) {
            const int orow0 = R0 + t * WSTEP;
            const int nr = min(WSTEP, R1 - orow0);
            const float* zSide = sZ + ((lane & 1) ? (2 * WZCH) : 0) + ejj;   // Z_2 / Z_0
            const float* zMid = sZ + WZCH + ejj;                             // Z_1
            float* op = out + (size_t)orow0 * Wo + x0 + ecol;
#pragma unroll 4
            for (int r = ch; r < nr; r += 3) {
                const int zo = (r & 1) * (32 * WZP) + (r >> 1) * WZP;
                op[(size_t)r * Wo] = zSide[zo] + zMid[zo];
            }
        }
        named_bar_sync(barId, 96u);
    }
}

// ------------------------------------------------------------------ host side
template <int KBP, int NPW>
struct WState {
    static int state;   // 0 = not initialised, 1 = usable, -1 = unusable
};
template <int KBP, int NPW>
int WState<KBP, NPW>::state = 0;

static int wino_nsm() {
    static int nsm = 0;
    if (nsm == 0) {
        int dev = 0, n = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
            nsm = n;
        else
            nsm = 132;
        cudaGetLastError();
    }
    return nsm;
}

template <int KBP, int NPW>
static int prepare() {
    int& state = WState<KBP, NPW>::state;
    if (state == 0) {
        constexpr int NT = (WNCW + NPW) * 32;
        const size_t smemBytes = WCfg<KBP>::SMEM;
        const cudaError_t e1 = cudaFuncSetAttribute(conv2d_wino_kernel<KBP, NPW>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    (int)smemBytes);
        cudaFuncSetAttribute(conv2d_wino_kernel<KBP, NPW>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        int o = 0;
        const cudaError_t e2 = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &o, conv2d_wino_kernel<KBP, NPW>, NT, smemBytes);
        bool ok = (e1 == cudaSuccess) && (e2 == cudaSuccess) && (o >= 1);
        if (ok && NPW == 4) {
            // setmaxnreg dec 80 / inc 144 balances only if every warp enters with 128 registers
            cudaFuncAttributes fa;
            if (cudaFuncGetAttributes(&fa, conv2d_wino_kernel<KBP, NPW>) != cudaSuccess ||
                fa.numRegs != 128)
                ok = false;
        }
        wino_nsm();
        cudaGetLastError();
        state = ok ? 1 : -1;
    }
    return state;
}

template <int KBP, int NPW>
static bool launch_one(const float* in, const float* ker, float* out, int H, int W, int kh,
                       int kw, int Ho, int Wo, dim3 grid, int segLen, int vec2) {
    if (prepare<KBP, NPW>() < 0) return false;
    conv2d_wino_kernel<KBP, NPW><<<grid, (WNCW + NPW) * 32, WCfg<KBP>::SMEM>>>(
        in, ker, out, H, W, kh, kw, Ho, Wo, segLen, vec2);
    if (cudaGetLastError() != cudaSuccess) {
        WState<KBP, NPW>::state = -1;
        return false;
    }
    return true;
}

// Returns false if the Winograd path cannot be used (caller falls back to f22).
template <int KBP>
static bool launch_wino(const float* in, const float* ker, float* out, int H, int W, int kh,
                        int kw, int Ho, int Wo) {
    const int nsm = wino_nsm();
    const int nStrips = (Wo + WTW - 1) / WTW;
    int nSeg = nsm / nStrips;
    if (nSeg < 1) nSeg = 1;
    const int maxSeg = (Ho + 1) / 2;
    if (nSeg > maxSeg) nSeg = maxSeg;
    if (nSeg < 1) nSeg = 1;
    int segLen = (Ho + nSeg - 1) / nSeg;
    segLen = (segLen + 1) & ~1;
    nSeg = (Ho + segLen - 1) / segLen;

    const int vec2 = ((W & 1) == 0) && ((reinterpret_cast<uintptr_t>(in) & 7) == 0) ? 1 : 0;
    dim3 grid(nStrips, nSeg);
    if (launch_one<KBP, 4>(in, ker, out, H, W, kh, kw, Ho, Wo, grid, segLen, vec2)) return true;
    return launch_one<KBP, 1>(in, ker, out, H, W, kh, kw, Ho, Wo, grid, segLen, vec2);
}

template <int KBP>
static bool prepare_kbp() {
    if (prepare<KBP, 4>() > 0) return true;
    return prepare<KBP, 1>() > 0;
}

// host-side setup only (used before a timed tuning launch); false if unusable
static bool prepare_for(int kw) {
    const int kbp = ((kw >> 1) + 3) & ~3;
    if (kbp <= 4) return prepare_kbp<4>();
    if (kbp <= 8) return prepare_kbp<8>();
    if (kbp <= 12) return prepare_kbp<12>();
    return prepare_kbp<16>();
}

// even kh, kw in [2, 32]; no synchronisation
static bool run(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
                int Ho, int Wo) {
    const int kbp = ((kw >> 1) + 3) & ~3;
    if (kbp <= 4) return launch_wino<4>(in, ker, out, H, W, kh, kw, Ho, Wo);
    if (kbp <= 8) return launch_wino<8>(in, ker, out, H, W, kh, kw, Ho, Wo);
    if (kbp <= 12) return launch_wino<12>(in, ker, out, H, W, kh, kw, Ho, Wo);
    return launch_wino<16>(in, ker, out, H, W, kh, kw, Ho, Wo);
}
}  // namespace cm_wino

// =================================================================================================
// Per-shape choice between W and F, by measurement on the first calls of a shape
// =================================================================================================
namespace cm_tune {
constexpr int NTAB = 64;
constexpr int NSAMP = 2;   // timed samples per candidate

struct Entry {
    int H, W, kh, kw;
    int n[2];          // samples taken: [0] = Winograd, [1] = f22
    float best[2];     // best time (ms)
    int choice;        // -1 = still measuring, 0 = Winograd, 1 = f22
};
static Entry g_tab[NTAB];
static int g_ntab = 0;
static cudaEvent_t g_ev[2];
static int g_evState = 0;   // 0 = not created, 1 = ok, -1 = failed

static bool events_ok() {
    if (g_evState == 0) {
        const bool ok = (cudaEventCreate(&g_ev[0]) == cudaSuccess) &&
                        (cudaEventCreate(&g_ev[1]) == cudaSuccess);
        cudaGetLastError();
        g_evState = ok ? 1 : -1;
    }
    return g_evState > 0;
}

static Entry* lookup(int H, int W, int kh, int kw) {
    for (int i = 0; i < g_ntab; ++i) {
        Entry& e = g_tab[i];
        if (e.H == H && e.W == W && e.kh == kh && e.kw == kw) return &e;
    }
    if (g_ntab >= NTAB) return nullptr;
    Entry& e = g_tab[g_ntab++];
    e.H = H;
    e.W = W;
    e.kh = kh;
    e.kw = kw;
    e.n[0] = 0;
    e.n[1] = 0;
    e.best[0] = 0.f;
    e.best[1] = 0.f;
    e.choice = -1;
    return &e;
}
}  // namespace cm_tune

// =================================================================================================
// entry point
// =================================================================================================
 void conv_2d(const float* input, const float* kernel, float* output, int input_rows, int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    cm_tune::Entry* pend = nullptr;
    int pendCand = 0;

    if (kh > 0 && kw > 0 && Ho > 0 && Wo > 0) {
        const bool winoOK = ((kh & 1) == 0) && ((kw & 1) == 0) && kh >= 8 && kh <= 32 &&
                            kw >= 8 && kw <= 32;
        if (!winoOK) {
            cm_path1::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
        } else if (kh >= 23 && kw >= 16) {
            if (!cm_wino::run(input, kernel, output, H, W, kh, kw, Ho, Wo))
                cm_path1::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
        } else {
            cm_tune::Entry* e = cm_tune::lookup(H, W, kh, kw);
            if (e == nullptr) {
                cm_path1::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
            } else {
                if (e->choice < 0) {
                    // one-time host setup of both candidates outside the timed window
                    if (!cm_tune::events_ok() || !cm_wino::prepare_for(kw))
                        e->choice = 1;
                    else
                        cm_path1::prepare(kh, kw);
                }
                if (e->choice == 0) {
                    if (!cm_wino::run(input, kernel, output, H, W, kh, kw, Ho, Wo)) {
                        e->choice = 1;
                        cm_path1::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
                    }
                } else if (e->choice == 1) {
                    cm_path1::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
                } else {
                    // measuring: alternate Winograd / f22 (each writes the full, correct output)
                    const int cand = (e->n[0] <= e->n[1]) ? 0 : 1;
                    cudaEventRecord(cm_tune::g_ev[0], 0);
                    bool ok = true;
                    if (cand == 0)
                        ok = cm_wino::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
                    else
                        cm_path1::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
                    if (ok) {
                        cudaEventRecord(cm_tune::g_ev[1], 0);
                        pend = e;
                        pendCand = cand;
                    } else {
                        e->choice = 1;
                        cm_path1::run(input, kernel, output, H, W, kh, kw, Ho, Wo);
                    }
                }
            }
        }
    }
    cudaDeviceSynchronize();

    if (pend != nullptr) {
        float ms = 0.f;
        if (cudaEventElapsedTime(&ms, cm_tune::g_ev[0], cm_tune::g_ev[1]) == cudaSuccess) {
            if (pend->n[pendCand] == 0 || ms < pend->best[pendCand]) pend->best[pendCand] = ms;
            pend->n[pendCand] += 1;
            if (pend->n[0] >= cm_tune::NSAMP && pend->n[1] >= cm_tune::NSAMP)
                pend->choice = (pend->best[0] < pend->best[1]) ? 0 : 1;
        } else {
            cudaGetLastError();
            pend->choice = 1;
        }
    }
}
}  // namespace cm_path1
#undef TW
#undef BH
#undef NS
#undef RING
#undef HALF
#undef CC
#undef NCW
#undef NCT
#undef NTHREADS
#undef KH_MAX
#undef NP_MAX
#undef SP
#undef PF
#undef F22_PUT

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows, int input_cols, int kernel_rows, int kernel_cols) {
    if (kernel_rows < 23) {
        return cm_path1::conv_2d(input, kernel, output, input_rows, input_cols, kernel_rows, kernel_cols);
    } else {
        return cm_path0::conv_2d(input, kernel, output, input_rows, input_cols, kernel_rows, kernel_cols);
    }
}
