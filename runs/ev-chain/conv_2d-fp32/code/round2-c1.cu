// conv_2d (fp32): valid 2-D cross-correlation
//   out[r][c] = sum_{m<kh} sum_{n<kw} in[r+m][c+n] * ker[m][n]
//
// Main path (kw <= 32, any kh): 3xTF32 tensor-core kernel, row-Toeplitz implicit GEMM on
// mma.sync.m16n8k8.tf32.
//   For one input row R and an n8-block b of 8 consecutive output rows (rows rb0..rb0+7):
//     out[rb0+j][c] += sum_n in[R][c+n] * K[R-rb0-j][n]
//   M = 16 output columns   : A[i][n] = x[c0+i+n]      (Hankel; thread needs x[base+4q] only)
//   N = 8 output rows       : B[n][j] = K[d-j][n], d = R-rb0 (zero outside 0 <= d-j < kh)
//   K = taps, 8 per k-step  : KS = ceil(kw/8) k-steps, weights zero padded to 8*KS
//   Values are split x = hi + lo (hi = rna_tf32(x), lo = rna_tf32(x-hi)); products use
//   hi*hi + hi*lo + lo*hi.
//   Accuracy: every (R, b) step accumulates into fresh temporaries (two of them; the small
//   correction terms go in first, then the hi*hi terms alternate between the two), which
//   are then added into fp32 master accumulators with round-to-nearest FADD.  The
//   hi*hi chain of any temporary is at most 2 MMAs long.
//   Warp tile = (16*MT) columns x 32 rows; block = 4 warps (2 x 2), tile (32*MT) x 64.
//   MT = 4 normally, MT = 2 when the grid would fill less than two blocks per SM.
// Fallback: naive kernel (kw > 32 or smem too small).
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int TC_THREADS = 128;   // 4 warps: 2 (columns) x 2 (rows)
constexpr int TC_TILE_H = 64;     // 2 warps x 32 output rows

template <int KS, int MT>
struct TcCfg {
    static constexpr int KWP = 8 * KS;                 // padded kernel width
    static constexpr int WTW = 16 * MT;                // warp tile width (output columns)
    static constexpr int TILE_W = 2 * WTW;             // block tile width
    static constexpr int NQ = 4 * MT + 2 * KS - 2;     // window values per thread per row
    static constexpr int TCOLS = TILE_W + KWP;         // smem columns loaded (mult. of 8)
    // smallest value >= TCOLS with STRIDE % 16 == 4: fragment staging is conflict-free
    static constexpr int STRIDE = ((TCOLS + 11) / 16) * 16 + 4;
    static constexpr int MINB = (MT >= 4) ? 2 : 3;     // blocks per SM (register budget)
    static_assert(STRIDE >= TCOLS, "stride");
    static_assert(STRIDE % 4 == 0, "stride alignment");
    static_assert(TCOLS % 4 == 0, "tcols");
};

__device__ __forceinline__ void cp_async_f32(float* sdst, const float* gsrc, int src_bytes) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(sdst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_16(float* sdst, const float* gsrc, int src_bytes) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(sdst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

__device__ __forceinline__ uint32_t f32_to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// d += A * B
__device__ __forceinline__ void mma_acc(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// d = A * B   (C = 0)
__device__ __forceinline__ void mma_zero(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
}

template <int KS, int MT>
__global__ void __launch_bounds__(TC_THREADS, TcCfg<KS, MT>::MINB)
conv2d_tc(const float* __restrict__ in, const float* __restrict__ ker, float* __restrict__ out,
          int H, int W, int kh, int kw, int Ho, int Wo, int tilesX, int vec4) {
    using C = TcCfg<KS, MT>;
    constexpr int WTW = C::WTW;
    constexpr int TILE_W = C::TILE_W;
    constexpr int NQ = C::NQ;
    constexpr int TCOLS = C::TCOLS;
    constexpr int STRIDE = C::STRIDE;

    extern __shared__ float4 smem4[];
    const int NPR = kh + 14;                       // kernel rows padded by 7 zero rows each side
    float4* sW4 = smem4;                           // [KS][NPR][4] float4 {hi(t),hi(t+4),lo(t),lo(t+4)}
    float* sT = reinterpret_cast<float*>(smem4 + NPR * KS * 4);   // [TR][STRIDE]

    const int tid = threadIdx.x;
    const int bx = blockIdx.x % tilesX;
    const int by = blockIdx.x / tilesX;
    const int r0 = by * TC_TILE_H;
    const int c0 = bx * TILE_W;
    const int TR = TC_TILE_H + kh - 1;

    // ---- 1. input tile (+halo) -> smem, zero-filled past the input edges ----
    if (vec4) {
        constexpr int NV = TCOLS / 4;
        const int total = TR * NV;
        for (int idx = tid; idx < total; idx += TC_THREADS) {
            const int rr = idx / NV;
            const int v = idx - rr * NV;
            const int gr = r0 + rr;
            const int gc = c0 + 4 * v;
            const bool ok = (gr < H) && (gc < W);   // W % 4 == 0 -> whole float4 inside
            const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
            cp_async_16(sT + rr * STRIDE + 4 * v, src, ok ? 16 : 0);
        }
    } else {
        const int total = TR * TCOLS;
        for (int idx = tid; idx < total; idx += TC_THREADS) {
            const int rr = idx / TCOLS;
            const int cc = idx - rr * TCOLS;
            const int gr = r0 + rr;
            const int gc = c0 + cc;
            const bool ok = (gr < H) && (gc < W);
            const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
            cp_async_f32(sT + rr * STRIDE + cc, src, ok ? 4 : 0);
        }
    }
    cp_async_commit();

    // ---- 2. weights -> smem: split hi/lo, fragment order, zero padded ----
    {
        const int nW = NPR * KS * 4;
        for (int e = tid; e < nW; e += TC_THREADS) {
            const int tt = e & 3;
            const int rest = e >> 2;
            const int ks = rest / NPR;
            const int pm = rest - ks * NPR;
            const int m = pm - 7;
            float v0 = 0.0f, v1 = 0.0f;
            if (m >= 0 && m < kh) {
                const int n0 = 8 * ks + tt;
                const int n1 = n0 + 4;
                if (n0 < kw) v0 = __ldg(ker + (size_t)m * kw + n0);
                if (n1 < kw) v1 = __ldg(ker + (size_t)m * kw + n1);
            }
            const uint32_t h0 = f32_to_tf32(v0);
            const uint32_t h1 = f32_to_tf32(v1);
            const uint32_t l0 = f32_to_tf32(v0 - __uint_as_float(h0));
            const uint32_t l1 = f32_to_tf32(v1 - __uint_as_float(h1));
            sW4[e] = make_float4(__uint_as_float(h0), __uint_as_float(h1), __uint_as_float(l0),
                                 __uint_as_float(l1));
        }
    }

    cp_async_wait_all();
    __syncthreads();

    // ---- 3. tensor-core compute ----
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int wr0 = (warp >> 1) * 32;   // tile-local first output row of this warp
    const int wc0 = (warp & 1) * WTW;   // tile-local first output column of this warp

    float acc[4][MT][4];
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[b][mt][r] = 0.0f;

    // n8-blocks of this warp that contain at least one valid output row
    int nb = 0;
    {
        const int rows_left = Ho - (r0 + wr0);
        const bool active = (rows_left > 0) && (c0 + wc0 < Wo);
        if (active) nb = min(4, (rows_left + 7) >> 3);
    }
    const int nR = (nb > 0) ? (kh + 31) : 0;   // input rows R' = 0 .. kh+30
    const int dmax = kh + 6;

    const float* xbase = sT + wr0 * STRIDE + wc0 + g + t;
    const float4* wbase = sW4 + (7 - g) * 4 + t;

#pragma unroll 1
    for (int rp = 0; rp < nR; ++rp) {
        // window: x[base + 4q], split into hi / lo
        uint32_t xh[NQ], xl[NQ];
        const float* xr = xbase + rp * STRIDE;
#pragma unroll
        for (int q = 0; q < NQ; ++q) {
            const float v = xr[4 * q];
            const uint32_t h = f32_to_tf32(v);
            xh[q] = h;
            xl[q] = f32_to_tf32(v - __uint_as_float(h));
        }

#pragma unroll
        for (int b = 0; b < 4; ++b) {
            const int d = rp - 8 * b;
            if (b < nb && d >= 0 && d <= dmax) {
                uint32_t bw[KS][4];
                const float4* wp = wbase + d * 4;
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    const float4 v = wp[ks * NPR * 4];
                    bw[ks][0] = __float_as_uint(v.x);   // hi(t)
                    bw[ks][1] = __float_as_uint(v.y);   // hi(t+4)
                    bw[ks][2] = __float_as_uint(v.z);   // lo(t)
                    bw[ks][3] = __float_as_uint(v.w);   // lo(t+4)
                }

                float tm[2][MT][4];
                // phase 1: small correction terms first (lo*hi -> tm0, hi*lo -> tm1)
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        const int q0 = 4 * mt + 2 * ks;
                        if (ks == 0) {
                            mma_zero(tm[0][mt], xl[q0], xl[q0 + 2], xl[q0 + 1], xl[q0 + 3],
                                     bw[ks][0], bw[ks][1]);
                            mma_zero(tm[1][mt], xh[q0], xh[q0 + 2], xh[q0 + 1], xh[q0 + 3],
                                     bw[ks][2], bw[ks][3]);
                        } else {
                            mma_acc(tm[0][mt], xl[q0], xl[q0 + 2], xl[q0 + 1], xl[q0 + 3],
                                    bw[ks][0], bw[ks][1]);
                            mma_acc(tm[1][mt], xh[q0], xh[q0 + 2], xh[q0 + 1], xh[q0 + 3],
                                    bw[ks][2], bw[ks][3]);
                        }
                    }
                }
                // phase 2: hi*hi, alternating temporaries (chains of <= 2 for KS <= 4)
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        const int q0 = 4 * mt + 2 * ks;
                        mma_acc(tm[ks & 1][mt], xh[q0], xh[q0 + 2], xh[q0 + 1], xh[q0 + 3],
                                bw[ks][0], bw[ks][1]);
                    }
                }
                // promote with round-to-nearest fp32 adds
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int r = 0; r < 4; ++r) acc[b][mt][r] += (tm[0][mt][r] + tm[1][mt][r]);
            }
        }
    }

    // ---- 4. stage the output tile in smem (reuse the input tile area) ----
    __syncthreads();
#pragma unroll
    for (int b = 0; b < 4; ++b) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            const int j0 = wr0 + 8 * b + 2 * t;    // output row (tile-local)
            const int i0 = wc0 + 16 * mt + g;      // output column (tile-local)
            float* s0 = sT + j0 * STRIDE + i0;
            s0[0] = acc[b][mt][0];
            s0[STRIDE] = acc[b][mt][1];
            s0[8] = acc[b][mt][2];
            s0[STRIDE + 8] = acc[b][mt][3];
        }
    }
    __syncthreads();

    // ---- 5. coalesced, guarded row stores ----
    for (int rr = warp; rr < TC_TILE_H; rr += TC_THREADS / 32) {
        const int orow = r0 + rr;
        if (orow >= Ho) break;
        float* gout = out + (size_t)orow * (size_t)Wo + c0;
        const float* srow = sT + rr * STRIDE;
#pragma unroll
        for (int k = 0; k < TILE_W / 32; ++k) {
            const int cc = lane + 32 * k;
            if (c0 + cc < Wo) gout[cc] = srow[cc];
        }
    }
}

// Generic fallback: one thread per output, same accumulation order as the reference.
__global__ void conv2d_naive(const float* __restrict__ in, const float* __restrict__ ker,
                             float* __restrict__ out, int W, int kh, int kw, int Ho, int Wo) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < Ho && c < Wo) {
        float acc = 0.0f;
        for (int m = 0; m < kh; ++m) {
            const float* rowp = in + (size_t)(r + m) * W + c;
            const float* kp = ker + (size_t)m * kw;
            for (int n = 0; n < kw; ++n) acc = fmaf(rowp[n], kp[n], acc);
        }
        out[(size_t)r * Wo + c] = acc;
    }
}

int smem_optin_limit() {
    static int limit = -1;
    if (limit < 0) {
        int dev = 0;
        int v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
                cudaSuccess ||
            v <= 0)
            v = 48 * 1024;
        limit = v;
    }
    return limit;
}

int num_sms() {
    static int n = -1;
    if (n < 0) {
        int dev = 0;
        int v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            v <= 0)
            v = 132;
        n = v;
    }
    return n;
}

template <int KS, int MT>
bool launch_tc(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
               int Ho, int Wo) {
    using C = TcCfg<KS, MT>;
    const size_t smem = (size_t)(kh + 14) * KS * 4 * sizeof(float4) +
                        (size_t)(TC_TILE_H + kh - 1) * (size_t)C::STRIDE * sizeof(float);
    const int limit = smem_optin_limit();
    if (smem > (size_t)limit) return false;

    const long long tilesX = ((long long)Wo + C::TILE_W - 1) / C::TILE_W;
    const long long tilesY = ((long long)Ho + TC_TILE_H - 1) / TC_TILE_H;
    const long long nblocks = tilesX * tilesY;
    if (nblocks <= 0 || nblocks > 0x7fffffffLL) return false;

    static bool configured = false;
    if (!configured) {
        cudaFuncSetAttribute(conv2d_tc<KS, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             limit);
        cudaFuncSetAttribute(conv2d_tc<KS, MT>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        configured = true;
    }
    const int vec4 = (((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0)) ? 1 : 0;
    conv2d_tc<KS, MT><<<(unsigned)nblocks, TC_THREADS, smem>>>(in, ker, out, H, W, kh, kw, Ho,
                                                                 Wo, (int)tilesX, vec4);
    return cudaGetLastError() == cudaSuccess;
}

template <int KS>
bool launch_tc_ks(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
                  int Ho, int Wo) {
    // wide tiles (MT = 4) unless the grid would fill less than two blocks per SM
    const long long b4 = (((long long)Wo + 127) / 128) * (((long long)Ho + TC_TILE_H - 1) / TC_TILE_H);
    const bool small = b4 < 2LL * num_sms();
    bool done = false;
    if (!small) done = launch_tc<KS, 4>(in, ker, out, H, W, kh, kw, Ho, Wo);
    if (!done) done = launch_tc<KS, 2>(in, ker, out, H, W, kh, kw, Ho, Wo);
    return done;
}

}  // namespace

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh > 0 && kw > 0 && H > 0 && W > 0 && Ho > 0 && Wo > 0) {
        bool done = false;
        if (kw <= 8)
            done = launch_tc_ks<1>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        else if (kw <= 16)
            done = launch_tc_ks<2>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        else if (kw <= 24)
            done = launch_tc_ks<3>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        else if (kw <= 32)
            done = launch_tc_ks<4>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        if (!done) {
            dim3 block(16, 16);
            dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y);
            conv2d_naive<<<grid, block>>>(input, kernel, output, W, kh, kw, Ho, Wo);
        }
    }
    cudaDeviceSynchronize();
}
