// conv_2d (fp32), valid 2-D cross-correlation, Hopper (sm_90a).
// Persistent column-strip streaming kernel:
//   * CTA = 4 compute warps + 1 producer warp. Each CTA owns a 128-column output strip and a
//     run of output rows (segment); it walks down in steps of BH=32 output rows.
//   * Input rows live in a 4-stage circular shared-memory ring (stage = 32 input rows, 128 rows
//     total), so the vertical halo is never reloaded. Stage loads: cp.async.bulk (TMA bulk copy,
//     mbarrier complete_tx) when W%4==0 and the input is 16B-aligned, else 4B cp.async with
//     cp.async.mbarrier.arrive.noinc. full/empty mbarrier pair per stage; no __syncthreads in loop.
//   * Compute: thread = 2 output rows (rg, rg+16) x 16 consecutive columns; per kernel row m the
//     (zero-padded to KWP) weight row is held in registers, input row segments are streamed with
//     LDS.128 through a sliding 20-register window. Lanes of each quarter-warp read 8 consecutive
//     rows with row pitch P == 4 (mod 8) floats -> conflict-free LDS.128.
//   * Epilogue: per-warp 32x32 staging tile in smem, then coalesced 128B row stores.
//   Accumulation order per output equals the naive baseline (m outer, n inner, fp32 FMA).
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

// ------------------------------------------------------------------ main kernel
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

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
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
