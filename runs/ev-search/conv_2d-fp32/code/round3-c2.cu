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

#include <cuda_runtime.h>
#include <stdint.h>

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
extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows, int input_cols, int kernel_rows, int kernel_cols) {
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
