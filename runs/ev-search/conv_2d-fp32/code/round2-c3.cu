// conv_2d (fp32), valid 2-D cross-correlation, Hopper (sm_90a).  round2-c3.
//
// Two paths:
//  (A) Tensor-core path (large images, 16 <= kw <= 32, kh <= 32): 3xTF32 narrow-slice Toeplitz
//      GEMM on wgmma with register-A.
//      * CTA = 2 compute warpgroups + 1 producer warp (c2's TMA-bulk / cp.async ring, 7 stages of
//        32 input rows, 160 floats wide). The CTA owns a 128-column strip and a run of rows, and
//        walks down in steps of 128 output rows (WG w owns rows 64w..64w+63 of each step).
//      * For kernel row m the output n8 tile t needs input k8 chunks s = t..t+D-1 with
//        B_{m,d}[k][n] = w[m][8d+k-n] (d = s-t, zero outside [0,kw)). hi/lo TF32 splits of the D
//        slices of every m are precomputed once per CTA in smem in wgmma's no-swizzle K-major
//        core-matrix layout, concatenated along N as [B_{D-1}|...|B_0].
//      * Each input chunk s (64 rows x 8 cols, ldmatrix.x4 -> the tf32 A fragment, split once into
//        hi/lo) drives 3 wgmma m64n(8*cnt)k8 (hi*Bhi, hi*Blo, lo*Bhi) whose accumulator is the
//        window of n-tiles max(0,s-D+1)..min(s,15) (compile-time register range, full unroll).
//      * Edge chunks (different N) are interleaved with each other before the steady N=8D chain and
//        are followed by wait_group(1), so a different-shape group never overlaps an unfinished
//        group on the same accumulators; steady-state groups use wait_group(2).
//      * Epilogue: direct stores from the accumulator fragment (Wo may be odd).
//      * A one-time on-device self-test (per D) checks the path against a float64 reference with the
//        task tolerance (bulk and cp.async loads, one and two segments, ring wrap), also trying the
//        swapped LBO/SBO descriptor convention; if it fails, the c2 path is used instead.
//  (B) c2's FFMA strip kernel (unchanged) for every other shape; naive kernel beyond its limits.
//  Set TC_ENABLE to 0 to dispatch everything to c2.
#include <cuda_runtime.h>
#include <stdint.h>

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

// ------------------------------------------------------------------ c2 host launch
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

// =====================================================================================
// Tensor-core path: 3xTF32 narrow-slice Toeplitz GEMM, wgmma with register A
// =====================================================================================
#ifndef TC_ENABLE
#define TC_ENABLE 1
#endif
#define TC_NT 16                       // n8 output tiles per strip
#define TC_TW (8 * TC_NT)              // 128 output columns per strip
#define TC_BH 128                      // output rows per step (2 warpgroups x 64)
#define TC_SR 32                       // input rows per ring stage
#define TC_NSTG 7                      // ring stages
#define TC_RING (TC_NSTG * TC_SR)      // 224 ring rows
#define TC_THREADS 288                 // 2 compute warpgroups + 1 producer warp
#define TC_KHMAX 32

template <int D>
struct TcCfg {
    static constexpr int NC = TC_NT + D - 1;       // input k8 chunks per kernel row
    static constexpr int LW = 8 * NC;              // loaded input columns per row
    static constexpr int P = LW + 4;               // ring row pitch (floats), == 4 mod 8
    static constexpr size_t B_BYTES = (size_t)TC_KHMAX * 2 * D * 256;
    static constexpr size_t RING_OFF = B_BYTES;
    static constexpr size_t RING_BYTES = (size_t)TC_RING * P * 4;
    static constexpr size_t BAR_OFF = RING_OFF + RING_BYTES;
    static constexpr size_t SMEM = BAR_OFF + 2 * TC_NSTG * 8;
};

// issue order of the chunks of one kernel row: edges interleaved (L0,R0,L1,R1,...), then the
// steady full-width chain.
__host__ __device__ constexpr int tc_chunk_of(int D, int i) {
    return (i < 2 * (D - 1)) ? (((i & 1) != 0) ? (TC_NT + (i >> 1)) : (i >> 1)) : (i - (D - 1));
}

__device__ __forceinline__ uint32_t tc_f2tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void tc_ldsm_x4(uint32_t addr, uint32_t (&x)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void tc_wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tc_wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void tc_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void tc_fence_acc(float (&acc)[64]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

#define TC_D4(o) "+f"(acc[(o) + 0]), "+f"(acc[(o) + 1]), "+f"(acc[(o) + 2]), "+f"(acc[(o) + 3])
#define TC_A4 "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])

// D[64 x 8*NTL] (accumulator tiles T0..T0+NTL-1) += A[64x8] (registers, tf32) * B[8 x 8*NTL] (smem)
template <int T0, int NTL>
__device__ __forceinline__ void tc_mma(float (&acc)[64], const uint32_t (&a)[4], uint64_t desc) {
    constexpr int b = 4 * T0;
    static_assert(NTL >= 1 && NTL <= 5 && T0 + NTL <= TC_NT, "bad tile range");
    if constexpr (NTL == 1) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
            : TC_D4(b)
            : TC_A4, "l"(desc), "r"(1)
            : "memory");
    } else if constexpr (NTL == 2) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1;\n}\n"
            : TC_D4(b), TC_D4(b + 4)
            : TC_A4, "l"(desc), "r"(1)
            : "memory");
    } else if constexpr (NTL == 3) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %17, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, "
            "{%12, %13, %14, %15}, %16, p, 1, 1;\n}\n"
            : TC_D4(b), TC_D4(b + 4), TC_D4(b + 8)
            : TC_A4, "l"(desc), "r"(1)
            : "memory");
    } else if constexpr (NTL == 4) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
            "{%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
            : TC_D4(b), TC_D4(b + 4), TC_D4(b + 8), TC_D4(b + 12)
            : TC_A4, "l"(desc), "r"(1)
            : "memory");
    } else {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %25, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n40k8.f32.tf32.tf32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19}, "
            "{%20, %21, %22, %23}, %24, p, 1, 1;\n}\n"
            : TC_D4(b), TC_D4(b + 4), TC_D4(b + 8), TC_D4(b + 12), TC_D4(b + 16)
            : TC_A4, "l"(desc), "r"(1)
            : "memory");
    }
}

// one input chunk S: split the A fragment, 3 wgmma on the tile window, commit, bounded wait
template <int D, int S, int WD>
__device__ __forceinline__ void tc_chunk_mma(float (&acc)[64], const uint32_t (&x)[4],
                                             uint64_t dHi, uint64_t dLo) {
    constexpr int T0 = (S - D + 1 > 0) ? (S - D + 1) : 0;
    constexpr int T1 = (S < TC_NT - 1) ? S : (TC_NT - 1);
    constexpr int NTL = T1 - T0 + 1;
    constexpr int P0 = (D - 1) - (S - T0);      // first slice position ([B_{D-1}|...|B_0])
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const float v = __uint_as_float(x[q]);
        hi[q] = tc_f2tf32(v);
        lo[q] = tc_f2tf32(__fsub_rn(v, __uint_as_float(hi[q])));
    }
    const uint64_t off = (uint64_t)(16 * P0);   // 256 B per slice, descriptor address is >> 4
    tc_wgmma_fence();
    tc_mma<T0, NTL>(acc, hi, dHi + off);
    tc_mma<T0, NTL>(acc, hi, dLo + off);
    tc_mma<T0, NTL>(acc, lo, dHi + off);
    tc_wgmma_commit();
    tc_wgmma_wait<WD>();
}

// all chunks of one kernel row, with the next chunk's ldmatrix issued ahead of the current MMAs
template <int D, int I>
__device__ __forceinline__ void tc_chunks(float (&acc)[64], const uint32_t (&xc)[4],
                                          uint32_t aAddr, uint32_t aPre, uint64_t dHi,
                                          uint64_t dLo, uint32_t (&xout)[4]) {
    constexpr int NC = TC_NT + D - 1;
    constexpr int S = tc_chunk_of(D, I);
    constexpr int WD = (I < 2 * (D - 1)) ? 1 : 2;
    uint32_t xn[4];
    if constexpr (I + 1 < NC) {
        tc_ldsm_x4(aAddr + (uint32_t)(tc_chunk_of(D, I + 1) * 32), xn);
    } else {
        tc_ldsm_x4(aPre + (uint32_t)(tc_chunk_of(D, 0) * 32), xn);
    }
    tc_chunk_mma<D, S, WD>(acc, xc, dHi, dLo);
    if constexpr (I + 1 < NC) {
        tc_chunks<D, I + 1>(acc, xn, aAddr, aPre, dHi, dLo, xout);
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) xout[q] = xn[q];
    }
}

template <int D>
__global__ void __launch_bounds__(TC_THREADS, 1)
conv2d_tc_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                 float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo,
                 int stepsPerSeg, int bulk, unsigned long long descConst) {
    using C = TcCfg<D>;
    constexpr int P = C::P;
    constexpr int LW = C::LW;
    extern __shared__ __align__(1024) unsigned char tc_smem[];
    float* sB = reinterpret_cast<float*>(tc_smem);
    float* sRing = reinterpret_cast<float*>(tc_smem + C::RING_OFF);
    uint64_t* bars = reinterpret_cast<uint64_t*>(tc_smem + C::BAR_OFF);
    const uint32_t fullBase = smem_u32(bars);
    const uint32_t emptyBase = smem_u32(bars + TC_NSTG);

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int x0 = blockIdx.x * TC_TW;
    const int R0 = blockIdx.y * stepsPerSeg * TC_BH;
    const int R1 = min(Ho, R0 + stepsPerSeg * TC_BH);
    const int nSteps = (R1 - R0 + TC_BH - 1) / TC_BH;
    const int E = (62 + kh) >> 5;                    // extra stages past the first of a WG block
    const int nStages = 4 * nSteps + E - 1;
    const int lrow = min(LW, W - x0);

    if (tid == 0) {
        for (int s = 0; s < TC_NSTG; ++s) {
            mbar_init(fullBase + 8 * s, bulk ? 1u : 32u);
            mbar_init(emptyBase + 8 * s, 256u);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    {
        // Toeplitz slices: [m][split hi/lo][p][k-half][n][k4], B_{m,d}[k][n] = w[m][8d+k-n]
        uint32_t* sBu = reinterpret_cast<uint32_t*>(sB);
        const int nB = kh * 2 * D * 64;
        for (int idx = tid; idx < nB; idx += TC_THREADS) {
            const int e = idx & 63;
            const int rest = idx >> 6;
            const int p = rest % D;
            const int rest2 = rest / D;
            const int split = rest2 & 1;
            const int m = rest2 >> 1;
            const int n = (e >> 2) & 7;
            const int k = ((e >> 5) << 2) + (e & 3);
            const int d = D - 1 - p;
            const int j = 8 * d + k - n;
            float wv = 0.f;
            if (j >= 0 && j < kw) wv = __ldg(ker + (size_t)m * kw + j);
            const uint32_t h = tc_f2tf32(wv);
            const uint32_t lo = tc_f2tf32(__fsub_rn(wv, __uint_as_float(h)));
            sBu[idx] = split ? lo : h;
        }
        // columns past the image edge are never loaded; they must be finite (they meet zero B)
        if (lrow < LW) {
            const int zc = LW - lrow;
            for (int i = tid; i < TC_RING * zc; i += TC_THREADS) {
                const int r = i / zc;
                const int c = lrow + (i - r * zc);
                sRing[r * P + c] = 0.f;
            }
        }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();

    // ================================================================ producer warp
    if (warp == 8) {
        for (int gs = 0; gs < nStages; ++gs) {
            const int slot = gs % TC_NSTG;
            if (gs >= TC_NSTG)
                mbar_wait(emptyBase + 8 * slot, (uint32_t)(((gs / TC_NSTG) - 1) & 1));
            const int grow0 = R0 + gs * TC_SR;
            int nvalid = H - grow0;
            nvalid = nvalid < 0 ? 0 : (nvalid > TC_SR ? TC_SR : nvalid);
            float* dstBase = sRing + (size_t)slot * TC_SR * P;
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

    // ================================================================ compute warpgroups
    const int wg = warp >> 2;          // 0..1
    const int wq = warp & 3;           // warp within the warpgroup
    const int gq = lane >> 2;
    const int tq = lane & 3;
    // ldmatrix.x4 row supplied by this lane: matrix j = lane>>3 -> rows +8*(j&1), cols +4*(j>>1)
    const int rOff = 64 * wg + 16 * wq + (lane & 7) + ((lane >> 3) & 1) * 8;
    const uint32_t cOffB = (uint32_t)((lane >> 4) & 1) * 16u;
    const uint32_t ringU = smem_u32(sRing);
    const uint64_t descB0 =
        (uint64_t)descConst | (uint64_t)((smem_u32(sB) >> 4) & 0x3FFFu);
    int rel = 0;   // stages [0, rel) already released by this thread
    float acc[64];

    for (int t = 0; t < nSteps; ++t) {
        const int f = 4 * t + 2 * wg;
        const int l = f + E;
        for (int gs = f; gs <= l; ++gs)
            mbar_wait(fullBase + 8 * (gs % TC_NSTG), (uint32_t)((gs / TC_NSTG) & 1));
        __syncwarp();
        // stages this warpgroup never reads (all loaded: a later stage is)
        for (; rel < f; ++rel) mbar_arrive(emptyBase + 8 * (rel % TC_NSTG));

        const int rowStart = R0 + TC_BH * t + 64 * wg;
        const bool active = rowStart < R1;
        if (active) {
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] = 0.f;
            tc_fence_acc(acc);
            int phys = (TC_BH * t + rOff) % TC_RING;
            uint32_t aAddr = ringU + (uint32_t)(phys * (P * 4)) + cOffB;
            uint64_t dHi = descB0;
            uint64_t dLo = descB0 + (uint64_t)(16 * D);
            uint32_t xcur[4];
            tc_ldsm_x4(aAddr, xcur);    // chunk tc_chunk_of(D,0) == 0
            for (int m = 0; m < kh; ++m) {
                phys = (phys + 1 == TC_RING) ? 0 : (phys + 1);
                const uint32_t aNext = ringU + (uint32_t)(phys * (P * 4)) + cOffB;
                const uint32_t aPre = (m + 1 < kh) ? aNext : aAddr;
                uint32_t xnext[4];
                tc_chunks<D, 0>(acc, xcur, aAddr, aPre, dHi, dLo, xnext);
#pragma unroll
                for (int q = 0; q < 4; ++q) xcur[q] = xnext[q];
                aAddr = aNext;
                dHi += (uint64_t)(32 * D);
                dLo += (uint64_t)(32 * D);
            }
            tc_wgmma_wait<0>();
            tc_fence_acc(acc);
        }
        for (int gs = f; gs <= l; ++gs) mbar_arrive(emptyBase + 8 * (gs % TC_NSTG));
        rel = l + 1;

        if (active) {
            const int rA = rowStart + 16 * wq + gq;
            const int rB = rA + 8;
            float* oA = out + (size_t)rA * Wo;
            float* oB = out + (size_t)rB * Wo;
#pragma unroll
            for (int i = 0; i < TC_NT; ++i) {
                const int c = x0 + 8 * i + 2 * tq;
                if (rA < R1) {
                    if (c < Wo) oA[c] = acc[4 * i + 0];
                    if (c + 1 < Wo) oA[c + 1] = acc[4 * i + 1];
                }
                if (rB < R1) {
                    if (c < Wo) oB[c] = acc[4 * i + 2];
                    if (c + 1 < Wo) oB[c + 1] = acc[4 * i + 3];
                }
            }
        }
    }
}

// ------------------------------------------------------------------ tensor path host side
template <int D>
static bool tc_prepare() {
    static int state = 0;
    if (state == 0) {
        const cudaError_t e = cudaFuncSetAttribute(
            conv2d_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)TcCfg<D>::SMEM);
        cudaFuncSetAttribute(conv2d_tc_kernel<D>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        state = (e == cudaSuccess) ? 1 : -1;
        cudaGetLastError();
    }
    return state > 0;
}

template <int D>
static cudaError_t launch_tc(const float* in, const float* ker, float* out, int H, int W, int kh,
                             int kw, int Ho, int Wo, int ctaTarget, unsigned long long descConst) {
    const int nStrips = (Wo + TC_TW - 1) / TC_TW;
    const int stepsTotal = (Ho + TC_BH - 1) / TC_BH;
    int nSeg = ctaTarget / nStrips;
    if (nSeg < 1) nSeg = 1;
    if (nSeg > stepsTotal) nSeg = stepsTotal;
    const int stepsPerSeg = (stepsTotal + nSeg - 1) / nSeg;
    nSeg = (stepsTotal + stepsPerSeg - 1) / stepsPerSeg;
    const int bulk = ((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0) ? 1 : 0;
    dim3 grid(nStrips, nSeg);
    conv2d_tc_kernel<D><<<grid, TC_THREADS, TcCfg<D>::SMEM>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                               stepsPerSeg, bulk, descConst);
    return cudaGetLastError();
}

static unsigned long long tc_desc_const(int conv) {
    // conv 1: LBO (K-direction core-matrix stride) = 128 B, SBO (N-direction 8-row stride) = 256 B
    // conv 2: the two fields swapped
    return (conv == 1) ? ((8ull << 16) | (16ull << 32)) : ((16ull << 16) | (8ull << 32));
}

__device__ __forceinline__ float tc_hrand(uint32_t i, uint32_t seed) {
    uint32_t x = i * 0x9E3779B1u + seed;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return (float)(x >> 8) * (1.0f / 8388608.0f) - 1.0f;
}
__global__ void tc_fill_kernel(float* p, int n, uint32_t seed) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = tc_hrand((uint32_t)i, seed);
}
__global__ void tc_check_kernel(const float* in, const float* ker, const float* got, int W, int kh,
                                int kw, int Ho, int Wo, int* bad) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= Ho * Wo) return;
    const int r = idx / Wo, c = idx - r * Wo;
    double s = 0.0, mag = 0.0;
    for (int m = 0; m < kh; ++m)
        for (int n = 0; n < kw; ++n) {
            const double p = (double)in[(size_t)(r + m) * W + c + n] * (double)ker[m * kw + n];
            s += p;
            mag += fabs(p);
        }
    const double g = (double)got[(size_t)r * Wo + c];
    const double err = fabs(g - s);
    // half of the task tolerance (atol 1e-7, rtol 1e-6, mtol 1e-6); NaN fails
    if (!(err <= 0.5e-7 + 0.5e-6 * fabs(s) + 0.5e-6 * mag)) atomicExch(bad, 1);
}

// One-time self test of the tensor path for this D (and kh class). Returns the descriptor
// convention that passed (1 or 2), or -1 (use c2).
template <int D>
static int tc_probe(int kh, int kw) {
    if (!tc_prepare<D>()) return -1;
    const int HP = 600, WMAX = 521;
    float* dIn = nullptr;
    float* dK = nullptr;
    float* dOut = nullptr;
    int* dBad = nullptr;
    int result = -1;
    bool okAlloc = cudaMalloc((void**)&dIn, sizeof(float) * HP * WMAX) == cudaSuccess;
    okAlloc = okAlloc && cudaMalloc((void**)&dK, sizeof(float) * kh * kw) == cudaSuccess;
    okAlloc = okAlloc && cudaMalloc((void**)&dOut, sizeof(float) * HP * WMAX) == cudaSuccess;
    okAlloc = okAlloc && cudaMalloc((void**)&dBad, sizeof(int)) == cudaSuccess;
    if (okAlloc) {
        tc_fill_kernel<<<(HP * WMAX + 255) / 256, 256>>>(dIn, HP * WMAX, 12345u);
        tc_fill_kernel<<<(kh * kw + 255) / 256, 256>>>(dK, kh * kw, 777u);
        for (int conv = 1; conv <= 2 && result < 0; ++conv) {
            bool pass = true;
            for (int v = 0; v < 2 && pass; ++v) {
                const int W = 520 + v;   // v=0: TMA bulk rows; v=1: cp.async rows
                const int Ho = HP - kh + 1, Wo = W - kw + 1;
                const int nStrips = (Wo + TC_TW - 1) / TC_TW;
                cudaMemset(dOut, 0xFF, sizeof(float) * HP * WMAX);   // NaN
                cudaMemset(dBad, 0, sizeof(int));
                if (launch_tc<D>(dIn, dK, dOut, HP, W, kh, kw, Ho, Wo, v == 0 ? 1 : 2 * nStrips,
                                 tc_desc_const(conv)) != cudaSuccess) {
                    pass = false;
                    break;
                }
                tc_check_kernel<<<(Ho * Wo + 255) / 256, 256>>>(dIn, dK, dOut, W, kh, kw, Ho, Wo,
                                                                dBad);
                int hb = 1;
                if (cudaMemcpy(&hb, dBad, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
                    hb = 1;
                if (hb != 0) pass = false;
            }
            if (pass) result = conv;
        }
    }
    if (dIn) cudaFree(dIn);
    if (dK) cudaFree(dK);
    if (dOut) cudaFree(dOut);
    if (dBad) cudaFree(dBad);
    cudaGetLastError();
    return result;
}

static int tc_num_sms() {
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

// ------------------------------------------------------------------ entry point
extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh > 0 && kw > 0 && Ho > 0 && Wo > 0) {
        bool done = false;
#if TC_ENABLE
        if (kw >= 16 && kw <= 32 && kh <= TC_KHMAX) {
            const int nsm = tc_num_sms();
            const long long tiles = (long long)((Wo + TC_TW - 1) / TC_TW) *
                                    (long long)((Ho + TC_BH - 1) / TC_BH);
            if (tiles >= 2LL * nsm) {
                const int D = (kw + 6) / 8 + 1;       // 3, 4 or 5
                const int eIdx = (kh == 1) ? 0 : 1;
                static int tcState[6][2] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
                int& st = tcState[D][eIdx];
                if (st == 0) {
                    int r;
                    if (D == 3) r = tc_probe<3>(kh, kw);
                    else if (D == 4) r = tc_probe<4>(kh, kw);
                    else r = tc_probe<5>(kh, kw);
                    st = (r > 0) ? r : -1;
                }
                if (st > 0) {
                    const unsigned long long desc = tc_desc_const(st);
                    cudaError_t e;
                    if (D == 3)
                        e = launch_tc<3>(input, kernel, output, H, W, kh, kw, Ho, Wo, nsm, desc);
                    else if (D == 4)
                        e = launch_tc<4>(input, kernel, output, H, W, kh, kw, Ho, Wo, nsm, desc);
                    else
                        e = launch_tc<5>(input, kernel, output, H, W, kh, kw, Ho, Wo, nsm, desc);
                    done = (e == cudaSuccess);
                }
            }
        }
#endif
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
