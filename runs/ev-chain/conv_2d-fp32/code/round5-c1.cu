// conv_2d (fp32): valid 2-D cross-correlation (no kernel flip)
//   out[r][c] = sum_{m<kh} sum_{n<kw} in[r+m][c+n] * ker[m][n]
//
// Paths (for large shapes the path is chosen once per shape, on its first call, by a verified
// autotune; the first call's result always comes from the round-3 path):
//  (N) NEW round 5, 1 <= kw <= 33: Hopper wgmma.mma_async (A from registers, RS) with
//      K = 2 kernel rows x 8 input columns.  Weight bands hold NB = 8 + roundup8(kw-1) columns
//      (16 / 24 / 40 for kw <= 9 / <= 17 / <= 33).  Per (row pair, 8-column chunk) two wgmmas:
//        #1  D1 (N = 2*Nc) = hi(x) * [hi(w)|lo(w)]   (interleaved core matrices, SBO = 128 B)
//        #2  D2 (N = Nc)  += lo(x) * hi(w)            (same bands, SBO = 256 B)
//      i.e. the three products hx*hw + hx*lw + lx*hw of the round-3/4 scheme (lo*lo dropped).
//      Loop order is chunk-major: for each 8-column chunk, all kernel row pairs.  D1 is double
//      buffered and flushed (plain FADD) after every 1 (CH2 = false) or 2 (CH2 = true) row
//      pairs; D2 (small terms) chains through the whole chunk.  Output columns are kept in a
//      sliding window of NB/8 8-column blocks; a finished block is written straight to global.
//      The output tile width OW is a runtime parameter (autotuned).
//  (A) round 4: wgmma with K = 1 kernel row x 16 columns (10 <= kw <= 33).
//  (B) round 3: scaled-FP16 two-term split implicit GEMM on mma.sync (kw <= 41), then a SIMT
//      fp32 kernel, then a naive kernel.
//
// Numerics of all tensor paths:
//   per tile s_a = 2^ea maps max|x| into [2^14, 2^15), s_w = 2^ew does the same for max|w|;
//   x*s_a = xh + xl, w*s_w = wh + wl (fp16 each); partial products are formed on the tensor
//   cores from short chains started from 0 and added into fp32 sums with plain FADDs;
//   out = (sum * 2^-ea) * 2^-ew.
//
// Safety: every new-path variant is self-tested once against an fp64 reference with half the
// real tolerance (signed and all-positive data, odd sizes, both descriptor LBO/SBO readings),
// and every candidate is checked against the round-3 result on the real shape before it is
// timed; it is only used if correct and faster.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace {

constexpr int NTHREADS = 256;  // 8 warps

// ------------------------------------------------------------------------------------------
// PTX helpers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async_f32(float* sdst, const float* gsrc, int src_bytes) {
    unsigned s = smem_u32(sdst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_16(void* sdst, const void* gsrc, int src_bytes) {
    unsigned s = smem_u32(sdst);
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
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t& r0, uint32_t& r1, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr));
}
// d += A * B
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// d = A * B   (C = 0)
__device__ __forceinline__ void mma16816_z(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                           uint32_t b1) {
    const float z = 0.0f;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
}

__device__ __forceinline__ uint32_t pack_h2(__half lo16, __half hi16) {
    return (uint32_t)__half_as_ushort(lo16) | ((uint32_t)__half_as_ushort(hi16) << 16);
}
__device__ __forceinline__ void split_f16(float v, __half& hi, __half& lo) {
    hi = __float2half_rn(v);
    lo = __float2half_rn(v - __half2float(hi));  // the residual is exact in fp32
}
// e such that M * 2^e lies in [2^14, 2^15) (clamped to a safe range); 0 when M == 0
__device__ __forceinline__ int scale_exp(float M) {
    if (!(M > 0.0f)) return 0;
    const int be = (__float_as_int(M) >> 23) & 0xff;  // biased exponent
    int e = (be == 0) ? 120 : (141 - be);             // 15 - (be - 126)
    e = e < -120 ? -120 : e;
    e = e > 120 ? 120 : e;
    return e;
}
__device__ __forceinline__ float exp2i(int e) {  // e in [-126, 127]
    return __int_as_float((e + 127) << 23);
}

// ------------------------------------------------------------------------------------------
// Tensor-core (mma.sync) path configuration  [round 3, unchanged]
// ------------------------------------------------------------------------------------------
template <int NC_, bool SHARED_, int KS_>
struct TcCfg {
    static constexpr int NC = NC_;          // k16 chunks per n-tile
    static constexpr bool SHARED = SHARED_; // 16-aligned shared chunks (phases 0/8)
    static constexpr int KS = KS_;          // kernel-row split across warp groups (1 or 2)
    static constexpr int TILE_W = 128;
    static constexpr int WARPS_R = 4 / KS;  // warp rows per block
    static constexpr int TILE_H = 16 * WARPS_R;
    // largest chunk position (units of 8 columns, warp-local)
    static constexpr int MAXC8 = SHARED ? (4 + 2 * NC) : (5 + 2 * NC);
    // fp32 columns staged == fp16 columns per hi (and per lo) row
    static constexpr int SH = 80 + 8 * MAXC8;
    static constexpr int RSB = 4 * SH + 16;  // row stride in bytes (odd multiple of 16)
    static constexpr int RSF = RSB / 4;      // row stride in floats
    static constexpr int PW = 16 * (NC + 1); // pair words per (kernel row, hi/lo)
    static constexpr int NU = 2 * NC + 1;    // B words per lane per kernel row per hi/lo
    static constexpr int OST = TILE_W + 8;   // output staging stride (floats)
    static_assert(SH % 8 == 0, "SH alignment");
    static_assert(((RSB / 16) & 1) == 1, "row stride must be an odd multiple of 16 bytes");
    static_assert(OST * 4 <= RSB, "output staging must fit in the tile area");
};

template <class C>
size_t tc_smem_bytes(int kh, int kw) {
    return (size_t)(C::TILE_H + kh - 1) * (size_t)C::RSB + (size_t)kh * 2 * C::PW * 4 +
           ((((size_t)kh * (size_t)kw) + 3) & ~(size_t)3) * 4 + 16 * 4;
}

template <int NC, bool SHARED, int KS>
__global__ void __launch_bounds__(NTHREADS, 2)
conv2d_tc(const float* __restrict__ in, const float* __restrict__ ker, float* __restrict__ out,
          int H, int W, int kh, int kw, int Ho, int Wo, int tilesX, int vec4) {
    using C = TcCfg<NC, SHARED, KS>;
    extern __shared__ __align__(128) unsigned char smem_tc[];

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int bx = blockIdx.x % tilesX;
    const int by = blockIdx.x / tilesX;
    const int r0 = by * C::TILE_H;
    const int c0 = bx * C::TILE_W;
    const int trows = C::TILE_H + kh - 1;
    const int nk = kh * kw;

    float* sT = reinterpret_cast<float*>(smem_tc);
    uint32_t* sPair = reinterpret_cast<uint32_t*>(smem_tc + (size_t)trows * C::RSB);
    float* sWf = reinterpret_cast<float*>(sPair + (size_t)kh * 2 * C::PW);
    float* sRed = sWf + ((nk + 3) & ~3);

    // ---- 1. fp32 input tile (+halo) -> smem, asynchronous, zero-filled past the edges ----
    if (vec4) {
        constexpr int Q = C::SH / 4;
        const int total = trows * Q;
        for (int idx = tid; idx < total; idx += NTHREADS) {
            const int rr = idx / Q;
            const int q = idx - rr * Q;
            const int gr = r0 + rr;
            const int gc = c0 + 4 * q;
            const bool ok = (gr < H) && (gc < W);  // W % 4 == 0: chunk fully in or out
            const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
            cp_async_16(sT + rr * C::RSF + 4 * q, src, ok ? 16 : 0);
        }
    } else {
        const int total = trows * C::SH;
        for (int idx = tid; idx < total; idx += NTHREADS) {
            const int rr = idx / C::SH;
            const int cc = idx - rr * C::SH;
            const int gr = r0 + rr;
            const int gc = c0 + cc;
            const bool ok = (gr < H) && (gc < W);
            const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
            cp_async_f32(sT + rr * C::RSF + cc, src, ok ? 4 : 0);
        }
    }
    cp_async_commit();

    // ---- 2. weights -> smem (fp32), max |w| ----
    float wmax = 0.0f;
    for (int i = tid; i < nk; i += NTHREADS) {
        const float v = __ldg(ker + i);
        sWf[i] = v;
        wmax = fmaxf(wmax, fabsf(v));
    }
    cp_async_wait_all();
    __syncthreads();

    // ---- 3. max |x| over the staged tile, block reduction ----
    float amax = 0.0f;
    {
        constexpr int Q = C::SH / 4;
        const int total = trows * Q;
        for (int idx = tid; idx < total; idx += NTHREADS) {
            const int rr = idx / Q;
            const int q = idx - rr * Q;
            const float4 v = *reinterpret_cast<const float4*>(sT + rr * C::RSF + 4 * q);
            amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        wmax = fmaxf(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
    }
    if (lane == 0) {
        sRed[warp] = amax;
        sRed[8 + warp] = wmax;
    }
    __syncthreads();
    amax = sRed[0];
    wmax = sRed[8];
#pragma unroll
    for (int i = 1; i < 8; ++i) {
        amax = fmaxf(amax, sRed[i]);
        wmax = fmaxf(wmax, sRed[8 + i]);
    }
    const int ea = scale_exp(amax);
    const int ew = scale_exp(wmax);
    const float sa = exp2i(ea);
    const float sw = exp2i(ew);

    // ---- 4. in-place conversion, one row per warp: fp32 row -> [hi SH halves][lo SH halves] ----
    {
        constexpr int NP2 = C::SH / 2;             // float2 per row
        constexpr int NPL = (NP2 + 31) / 32;       // per lane
        for (int rr = warp; rr < trows; rr += NTHREADS / 32) {
            unsigned char* rowb = smem_tc + (size_t)rr * C::RSB;
            const float2* rf = reinterpret_cast<const float2*>(rowb);
            uint32_t* rh = reinterpret_cast<uint32_t*>(rowb);
            uint32_t* rl = reinterpret_cast<uint32_t*>(rowb + 2 * C::SH);
            float2 v[NPL];
#pragma unroll
            for (int k = 0; k < NPL; ++k) {
                const int p = lane + 32 * k;
                v[k] = (p < NP2) ? rf[p] : make_float2(0.0f, 0.0f);
            }
            __syncwarp();
#pragma unroll
            for (int k = 0; k < NPL; ++k) {
                const int p = lane + 32 * k;
                if (p < NP2) {
                    __half hx, lx, hy, ly;
                    split_f16(v[k].x * sa, hx, lx);
                    split_f16(v[k].y * sa, hy, ly);
                    rh[p] = pack_h2(hx, hy);
                    rl[p] = pack_h2(lx, ly);
                }
            }
            __syncwarp();
        }
    }

    // ---- 5. weight pair words: P[m][h][tau+16] = half2(w_h[m][tau], w_h[m][tau+1]) ----
    {
        const int total = kh * 2 * C::PW;
        for (int idx = tid; idx < total; idx += NTHREADS) {
            const int m = idx / (2 * C::PW);
            const int rem = idx - m * (2 * C::PW);
            const int h = (rem >= C::PW) ? 1 : 0;
            const int tau = rem - h * C::PW - 16;
            const float* wrow = sWf + m * kw;
            const float v0 = (tau >= 0 && tau < kw) ? wrow[tau] * sw : 0.0f;
            const float v1 = (tau + 1 >= 0 && tau + 1 < kw) ? wrow[tau + 1] * sw : 0.0f;
            __half h0, l0, h1, l1;
            split_f16(v0, h0, l0);
            split_f16(v1, h1, l1);
            sPair[idx] = h ? pack_h2(l0, l1) : pack_h2(h0, h1);
        }
    }
    __syncthreads();

    // ---- 6. main loop ----
    const int wc = warp & 1;
    const int wr = (warp >> 1) & (C::WARPS_R - 1);
    const int ks = warp / (2 * C::WARPS_R);  // 0 for KS == 1
    const int g = lane >> 2;
    const int q4 = lane & 3;

    const uint32_t aBase = smem_u32(smem_tc) +
                           (uint32_t)((wr * 16 + (lane & 15)) * C::RSB +
                                      (wc * 64 + 8 * (lane >> 4)) * 2);
    const uint32_t* pBase = sPair + (8 + 2 * q4 - g);

    float sum[8][4];
#pragma unroll
    for (int t = 0; t < 8; ++t) {
        sum[t][0] = 0.0f;
        sum[t][1] = 0.0f;
        sum[t][2] = 0.0f;
        sum[t][3] = 0.0f;
    }

#pragma unroll 1
    for (int m = ks; m < kh; m += KS) {
        const uint32_t* pr = pBase + m * (2 * C::PW);
        uint32_t bh[C::NU], bl[C::NU];
#pragma unroll
        for (int u = 0; u < C::NU; ++u) {
            bh[u] = pr[8 * u];
            bl[u] = pr[C::PW + 8 * u];
        }
        const uint32_t arow = aBase + (uint32_t)(m * C::RSB);
        uint32_t ah[4], al[4];

#pragma unroll
        for (int c8 = 0; c8 <= C::MAXC8; ++c8) {
            if (SHARED) {
                if (c8 & 1) continue;
                ldsm_x4(ah, arow + 16u * (uint32_t)c8);
                ldsm_x4(al, arow + 16u * (uint32_t)c8 + 2u * C::SH);
            } else {
                if (c8 == 0) {
                    ldsm_x4(ah, arow);
                    ldsm_x4(al, arow + 2u * C::SH);
                } else {
                    // chunk c8 = [8c8, 8c8+16): first half is the previous chunk's second half
                    ah[0] = ah[2];
                    ah[1] = ah[3];
                    al[0] = al[2];
                    al[1] = al[3];
                    ldsm_x2(ah[2], ah[3], arow + 16u * (uint32_t)c8 + 16u);
                    ldsm_x2(al[2], al[3], arow + 16u * (uint32_t)c8 + 16u + 2u * C::SH);
                }
            }

            float tmp[8][4];
            // lo(x) * hi(w), from C = 0
#pragma unroll
            for (int i = 0; i < NC; ++i) {
#pragma unroll
                for (int t = 0; t < 8; ++t) {
                    const int p = SHARED ? (t & 1) : 0;
                    if (t - p + 2 * i != c8) continue;
                    const int u = 2 * i - p + 1;
                    mma16816_z(tmp[t], al, bh[u], bh[u + 1]);
                }
            }
            // hi(x) * lo(w)
#pragma unroll
            for (int i = 0; i < NC; ++i) {
#pragma unroll
                for (int t = 0; t < 8; ++t) {
                    const int p = SHARED ? (t & 1) : 0;
                    if (t - p + 2 * i != c8) continue;
                    const int u = 2 * i - p + 1;
                    mma16816(tmp[t], ah, bl[u], bl[u + 1]);
                }
            }
            // hi(x) * hi(w)
#pragma unroll
            for (int i = 0; i < NC; ++i) {
#pragma unroll
                for (int t = 0; t < 8; ++t) {
                    const int p = SHARED ? (t & 1) : 0;
                    if (t - p + 2 * i != c8) continue;
                    const int u = 2 * i - p + 1;
                    mma16816(tmp[t], ah, bh[u], bh[u + 1]);
                }
            }
            // round-to-nearest flush into the fp32 sums
#pragma unroll
            for (int i = 0; i < NC; ++i) {
#pragma unroll
                for (int t = 0; t < 8; ++t) {
                    const int p = SHARED ? (t & 1) : 0;
                    if (t - p + 2 * i != c8) continue;
                    sum[t][0] += tmp[t][0];
                    sum[t][1] += tmp[t][1];
                    sum[t][2] += tmp[t][2];
                    sum[t][3] += tmp[t][3];
                }
            }
        }
    }

    // ---- 7. epilogue: unscale, stage in smem, coalesced guarded row stores ----
    __syncthreads();  // everyone is done reading the hi/lo tile
    float* sO = sT;
    const float ua = exp2i(-ea);
    const float uw = exp2i(-ew);
    const int orl = wr * 16 + g;

    if (KS == 2) {
        if (ks == 1) {
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                const int col = wc * 64 + 8 * t + 2 * q4;
                *reinterpret_cast<float2*>(sO + orl * C::OST + col) =
                    make_float2(sum[t][0], sum[t][1]);
                *reinterpret_cast<float2*>(sO + (orl + 8) * C::OST + col) =
                    make_float2(sum[t][2], sum[t][3]);
            }
        }
        __syncthreads();
        if (ks == 0) {
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                const int col = wc * 64 + 8 * t + 2 * q4;
                const float2 a = *reinterpret_cast<const float2*>(sO + orl * C::OST + col);
                const float2 b = *reinterpret_cast<const float2*>(sO + (orl + 8) * C::OST + col);
                sum[t][0] += a.x;
                sum[t][1] += a.y;
                sum[t][2] += b.x;
                sum[t][3] += b.y;
            }
        }
    }
    if (ks == 0) {
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            const int col = wc * 64 + 8 * t + 2 * q4;
            *reinterpret_cast<float2*>(sO + orl * C::OST + col) =
                make_float2((sum[t][0] * ua) * uw, (sum[t][1] * ua) * uw);
            *reinterpret_cast<float2*>(sO + (orl + 8) * C::OST + col) =
                make_float2((sum[t][2] * ua) * uw, (sum[t][3] * ua) * uw);
        }
    }
    __syncthreads();

    for (int rr = warp; rr < C::TILE_H; rr += NTHREADS / 32) {
        const int orow = r0 + rr;
        if (orow >= Ho) break;
        float* gout = out + (size_t)orow * (size_t)Wo + c0;
        const float* srow = sO + rr * C::OST;
#pragma unroll
        for (int k = 0; k < C::TILE_W / 32; ++k) {
            const int cc = lane + 32 * k;
            if (c0 + cc < Wo) gout[cc] = srow[cc];
        }
    }
}

// ------------------------------------------------------------------------------------------
// SIMT fp32 fallback (previous round's kernel), kw <= 32
// ------------------------------------------------------------------------------------------
constexpr int TW = 32;                   // output columns per thread
constexpr int CGROUPS = 4;               // column groups per tile
constexpr int S_TILE_W = TW * CGROUPS;   // 128 output columns per tile
constexpr int S_TILE_H = 64;             // 8 warps x 8 rows, one output row per thread

template <int KWP>
struct Cfg {
    static constexpr int NCH = (KWP < 16) ? KWP : 16;
    static constexpr int NCHUNK = KWP / NCH;
    static constexpr int WIN = TW + NCH;
    static constexpr int TCOLS = S_TILE_W + KWP;
    static constexpr int STRIDE = ((TCOLS - 4 + 31) / 32) * 32 + 4;
    static_assert(STRIDE >= TCOLS, "stride");
    static_assert(STRIDE % 4 == 0, "stride alignment");
    static_assert(WIN % 4 == 0 && NCH % 4 == 0, "vector width");
};

template <int KWP>
__global__ void __launch_bounds__(NTHREADS, 2)
conv2d_tiled(const float* __restrict__ in, const float* __restrict__ ker,
             float* __restrict__ out, int H, int W, int kh, int kw, int Ho, int Wo,
             int tilesX) {
    using Cf = Cfg<KWP>;
    constexpr int NCH = Cf::NCH;
    constexpr int NCHUNK = Cf::NCHUNK;
    constexpr int WIN = Cf::WIN;
    constexpr int TCOLS = Cf::TCOLS;
    constexpr int STRIDE = Cf::STRIDE;

    extern __shared__ __align__(16) float smem_simt[];
    float* sW = smem_simt;
    float* sT = smem_simt + kh * KWP;

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int bx = blockIdx.x % tilesX;
    const int by = blockIdx.x / tilesX;
    const int r0 = by * S_TILE_H;
    const int c0 = bx * S_TILE_W;
    const int trows = S_TILE_H + kh - 1;

    for (int rr = warp; rr < trows; rr += NTHREADS / 32) {
        const int gr = r0 + rr;
        const bool rok = gr < H;
        const float* grow = in + (size_t)(rok ? gr : 0) * (size_t)W;
        float* srow = sT + rr * STRIDE;
#pragma unroll
        for (int k = 0; k < (TCOLS + 31) / 32; ++k) {
            const int cc = lane + 32 * k;
            if (cc < TCOLS) {
                const int gc = c0 + cc;
                const bool ok = rok && (gc < W);
                cp_async_f32(srow + cc, ok ? (grow + gc) : in, ok ? 4 : 0);
            }
        }
    }
    cp_async_commit();

    for (int idx = tid; idx < kh * KWP; idx += NTHREADS) {
        const int m = idx / KWP;
        const int n = idx - m * KWP;
        sW[idx] = (n < kw) ? __ldg(ker + (size_t)m * kw + n) : 0.0f;
    }

    cp_async_wait_all();
    __syncthreads();

    const int row = warp * 8 + (lane & 7);
    const int cg = lane >> 3;
    float acc[TW];
#pragma unroll
    for (int j = 0; j < TW; ++j) acc[j] = 0.0f;

    const float* tp = sT + row * STRIDE + cg * TW;

#pragma unroll 1
    for (int m = 0; m < kh; ++m) {
        const float* wrow = sW + m * KWP;
        const float* trow = tp + m * STRIDE;
#pragma unroll 1
        for (int h = 0; h < NCHUNK; ++h) {
            float w[NCH];
            const float4* wp = reinterpret_cast<const float4*>(wrow + h * NCH);
#pragma unroll
            for (int q = 0; q < NCH / 4; ++q) {
                const float4 t = wp[q];
                w[4 * q + 0] = t.x;
                w[4 * q + 1] = t.y;
                w[4 * q + 2] = t.z;
                w[4 * q + 3] = t.w;
            }
            float win[WIN];
            const float4* xp = reinterpret_cast<const float4*>(trow + h * NCH);
#pragma unroll
            for (int q = 0; q < WIN / 4; ++q) {
                const float4 t = xp[q];
                win[4 * q + 0] = t.x;
                win[4 * q + 1] = t.y;
                win[4 * q + 2] = t.z;
                win[4 * q + 3] = t.w;
            }
#pragma unroll
            for (int n = 0; n < NCH; ++n) {
#pragma unroll
                for (int j = 0; j < TW; ++j) acc[j] = fmaf(win[j + n], w[n], acc[j]);
            }
        }
    }

    __syncthreads();
    {
        float4* so = reinterpret_cast<float4*>(sT + row * STRIDE + cg * TW);
#pragma unroll
        for (int q = 0; q < TW / 4; ++q)
            so[q] = make_float4(acc[4 * q + 0], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
    }
    __syncthreads();

    for (int rr = warp; rr < S_TILE_H; rr += NTHREADS / 32) {
        const int orow = r0 + rr;
        if (orow >= Ho) break;
        float* gout = out + (size_t)orow * (size_t)Wo + c0;
        const float* srow = sT + rr * STRIDE;
#pragma unroll
        for (int k = 0; k < S_TILE_W / 32; ++k) {
            const int cc = lane + 32 * k;
            if (c0 + cc < Wo) gout[cc] = srow[cc];
        }
    }
}

// Generic fallback: one thread per output.
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

// ==========================================================================================
// Hopper wgmma helpers
// ==========================================================================================
template <int N>
struct IntTag {};

__device__ __forceinline__ void bar_wg(uint32_t id) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// no-swizzle (interleave) smem matrix descriptor; LBO = SBO = 128 bytes
__device__ __forceinline__ uint64_t desc_nosw(uint32_t saddr) {
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)8u << 16) | ((uint64_t)8u << 32);
}
template <int NR>
__device__ __forceinline__ void fence_regs(float (&r)[NR]) {
#pragma unroll
    for (int i = 0; i < NR; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// D(64xNN) (+)= A(64x16, registers) * B(16xNN, smem descriptor); acc == 0 -> D = A*B.
// Uses d[0 .. NN/2-1].
#define WGF4(i) "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
#define WGS8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define WGS16 WGS8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define WGS24 WGS16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define WGS32 WGS24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define WGS40 WGS32 ", %32, %33, %34, %35, %36, %37, %38, %39"

#define DEFINE_WG_MMA(NN, REGSTR, ASTR, FLAGSTR, ...)                                        \
    template <int NR>                                                                        \
    __device__ __forceinline__ void wg_mma(IntTag<NN>, float (&d)[NR], const uint32_t (&a)[4], \
                                           uint64_t desc, int acc) {                         \
        static_assert(NR >= NN / 2, "accumulator too small");                                \
        asm volatile("{\n"                                                                   \
                     ".reg .pred p;\n"                                                       \
                     "setp.ne.b32 p, " FLAGSTR ", 0;\n"                                      \
                     "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32.f16.f16 "              \
                     "{" REGSTR "}, " ASTR ", p, 1, 1, 0;\n"                                 \
                     "}\n"                                                                   \
                     : __VA_ARGS__                                                           \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));     \
    }

DEFINE_WG_MMA(8, "%0, %1, %2, %3", "{%4, %5, %6, %7}, %8", "%9", WGF4(0))
DEFINE_WG_MMA(16, WGS8, "{%8, %9, %10, %11}, %12", "%13", WGF4(0), WGF4(4))
DEFINE_WG_MMA(24, WGS8 ", %8, %9, %10, %11", "{%12, %13, %14, %15}, %16", "%17", WGF4(0),
              WGF4(4), WGF4(8))
DEFINE_WG_MMA(32, WGS16, "{%16, %17, %18, %19}, %20", "%21", WGF4(0), WGF4(4), WGF4(8),
              WGF4(12))
DEFINE_WG_MMA(40, WGS16 ", %16, %17, %18, %19", "{%20, %21, %22, %23}, %24", "%25", WGF4(0),
              WGF4(4), WGF4(8), WGF4(12), WGF4(16))
DEFINE_WG_MMA(48, WGS24, "{%24, %25, %26, %27}, %28", "%29", WGF4(0), WGF4(4), WGF4(8),
              WGF4(12), WGF4(16), WGF4(20))
DEFINE_WG_MMA(64, WGS32, "{%32, %33, %34, %35}, %36", "%37", WGF4(0), WGF4(4), WGF4(8),
              WGF4(12), WGF4(16), WGF4(20), WGF4(24), WGF4(28))
DEFINE_WG_MMA(80, WGS40, "{%40, %41, %42, %43}, %44", "%45", WGF4(0), WGF4(4), WGF4(8),
              WGF4(12), WGF4(16), WGF4(20), WGF4(24), WGF4(28), WGF4(32), WGF4(36))

// ==========================================================================================
// Round-4 wgmma path (unchanged)
// ==========================================================================================
// Configuration: P = band padding (>= kw-1, multiple of 8), OW = output tile width per warpgroup
template <int P8_, int OW_>
struct WgCfg {
    static constexpr int P = 8 * P8_;
    static constexpr int OW = OW_;            // output columns per warpgroup tile
    static constexpr int OH = 64;             // output rows per warpgroup tile
    static constexpr int N = 16 + P;          // full wgmma N
    static constexpr int NS = N / 8 + 1;      // core matrices per (kernel row, hi/lo)
    static constexpr int NQ = (OW + P + 15) / 16;  // k16 chunks per kernel row
    static constexpr int SC = 16 * NQ;        // staged columns
    static constexpr int RSB = 4 * SC + 16;   // row stride (bytes), odd multiple of 16
    static constexpr int RSF = RSB / 4;
    static constexpr int NB = OW / 8;         // 8-column output blocks
    static constexpr int NR = N / 2;          // accumulator registers per chunk
    static constexpr int OST = OW + 8;        // output staging stride (floats)
    static constexpr int BM_BYTES = 2 * NS * 128;  // B bytes per kernel row
    static_assert(NQ % 2 == 0, "two accumulator sets need an even chunk count");
    static_assert(((RSB / 16) & 1) == 1, "row stride must be an odd multiple of 16 bytes");
    static_assert(OST * 4 <= RSB, "output staging must fit");
    static_assert(OW % 8 == 0, "tile width");
};

template <class C, int Q>
struct ChunkGeom {
    static constexpr int LO = 16 * Q + 16 - C::OW;
    static constexpr int N0 = LO > 0 ? LO : 0;           // first D column (reversed order)
    static constexpr int HI = 16 * Q + 16;
    static constexpr int N1 = HI < C::N ? HI : C::N;     // one past the last D column
    static constexpr int NN = N1 - N0;
    static_assert(NN == 16 || NN == 32 || NN == 48, "unsupported chunk width");
};

// sum[cb][e + 2h] holds output (row g + 8h, column 8cb + 7 - 2q4 - e)
template <class C, int Q>
__device__ __forceinline__ void flush_chunk(float (&sum)[C::NB][4], float (&t)[C::NR]) {
    typedef ChunkGeom<C, Q> G;
#pragma unroll
    for (int b = 0; b < G::NN / 8; ++b) {
        const int cb = 2 * Q + 1 - G::N0 / 8 - b;
        sum[cb][0] += t[4 * b + 0];
        sum[cb][1] += t[4 * b + 1];
        sum[cb][2] += t[4 * b + 2];
        sum[cb][3] += t[4 * b + 3];
    }
}

template <class C, int Q>
__device__ __forceinline__ void chunk_step(float (&sum)[C::NB][4], float (&tmp)[2][C::NR],
                                           uint32_t (&ah)[2][4], uint32_t (&al)[2][4],
                                           uint32_t arow, uint32_t arow_next, uint64_t dHi,
                                           uint64_t dLo) {
    typedef ChunkGeom<C, Q> G;
    constexpr int S = Q & 1;
    constexpr int QP = (Q + C::NQ - 1) % C::NQ;  // previous chunk (wraps to last chunk of m-1)
    constexpr int SP = QP & 1;
    static_assert(S != SP, "accumulator set parity");

    fence_regs(tmp[S]);
    wgmma_fence();
    wg_mma(IntTag<G::NN>(), tmp[S], al[S], dHi + (uint64_t)G::N0, 0);  // lo(x)*hi(w), C = 0
    wg_mma(IntTag<G::NN>(), tmp[S], ah[S], dLo + (uint64_t)G::N0, 1);  // + hi(x)*lo(w)
    wg_mma(IntTag<G::NN>(), tmp[S], ah[S], dHi + (uint64_t)G::N0, 1);  // + hi(x)*hi(w)
    wgmma_commit();

    wgmma_wait<1>();  // previous chunk complete
    fence_regs(tmp[SP]);
    flush_chunk<C, QP>(sum, tmp[SP]);

    // A fragments of the next chunk (next kernel row's chunk 0 after the last chunk)
    const uint32_t an = (Q + 1 < C::NQ) ? (arow + 32u * (uint32_t)(Q + 1)) : arow_next;
    ldsm_x4(ah[SP], an);
    ldsm_x4(al[SP], an + 2u * (uint32_t)C::SC);
}

template <class C, int Q, bool LAST = (Q + 1 == C::NQ)>
struct ChunkRun {
    static __device__ __forceinline__ void run(float (&sum)[C::NB][4], float (&tmp)[2][C::NR],
                                               uint32_t (&ah)[2][4], uint32_t (&al)[2][4],
                                               uint32_t arow, uint32_t arow_next, uint64_t dHi,
                                               uint64_t dLo) {
        chunk_step<C, Q>(sum, tmp, ah, al, arow, arow_next, dHi, dLo);
        ChunkRun<C, Q + 1>::run(sum, tmp, ah, al, arow, arow_next, dHi, dLo);
    }
};
template <class C, int Q>
struct ChunkRun<C, Q, true> {
    static __device__ __forceinline__ void run(float (&sum)[C::NB][4], float (&tmp)[2][C::NR],
                                               uint32_t (&ah)[2][4], uint32_t (&al)[2][4],
                                               uint32_t arow, uint32_t arow_next, uint64_t dHi,
                                               uint64_t dLo) {
        chunk_step<C, Q>(sum, tmp, ah, al, arow, arow_next, dHi, dLo);
    }
};

// Persistent kernel: blockDim = 128 * nwg (nwg <= 3); each warpgroup processes its own 64 x OW
// tiles (static round robin) in its own smem buffer; B bands are shared by the CTA.
template <class C>
__global__ void __launch_bounds__(384, 1)
conv2d_wg(const float* __restrict__ in, const float* __restrict__ ker, float* __restrict__ out,
          int H, int W, int kh, int kw, int Ho, int Wo, int tilesX, int T, int vec4) {
    extern __shared__ __align__(128) unsigned char smem_wg[];

    const int tid = threadIdx.x;
    const int nthr = blockDim.x;
    const int nwg = nthr >> 7;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int trows = C::OH + kh - 1;
    const int nk = kh * kw;

    uint32_t* sB = reinterpret_cast<uint32_t*>(smem_wg);
    const size_t bbytes = (size_t)kh * (size_t)C::BM_BYTES;
    const size_t bufbytes = (size_t)trows * (size_t)C::RSB;
    float* sRed = reinterpret_cast<float*>(smem_wg + bbytes + (size_t)nwg * bufbytes);

    // ---- CTA prologue 1: max |w| (all weights) ----
    float wmax = 0.0f;
    for (int i = tid; i < nk; i += nthr) wmax = fmaxf(wmax, fabsf(__ldg(ker + i)));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) wmax = fmaxf(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
    if (lane == 0) sRed[warp] = wmax;
    __syncthreads();
    wmax = 0.0f;
    for (int i = 0; i < (nthr >> 5); ++i) wmax = fmaxf(wmax, sRed[i]);
    const int ew = scale_exp(wmax);
    const float sw = exp2i(ew);
    const float uw = exp2i(-ew);

    // ---- CTA prologue 2: Toeplitz bands. core s, row i, element j = w[m][8s + i + j - 15] ----
    {
        const int nwords = kh * 2 * C::NS * 32;
        for (int idx = tid; idx < nwords; idx += nthr) {
            const int jp = idx & 3;
            const int i = (idx >> 2) & 7;
            const int rest = idx >> 5;  // (m*2 + h)*NS + s
            const int s = rest % C::NS;
            const int mh = rest / C::NS;
            const int h = mh & 1;
            const int m = mh >> 1;
            const int e0 = 8 * s + i + 2 * jp - 15;
            const float* wrow = ker + (size_t)m * (size_t)kw;
            const float v0 = (e0 >= 0 && e0 < kw) ? __ldg(wrow + e0) * sw : 0.0f;
            const float v1 = (e0 + 1 >= 0 && e0 + 1 < kw) ? __ldg(wrow + e0 + 1) * sw : 0.0f;
            __half h0, l0, h1, l1;
            split_f16(v0, h0, l0);
            split_f16(v1, h1, l1);
            sB[idx] = h ? pack_h2(l0, l1) : pack_h2(h0, h1);
        }
    }
    fence_proxy_async_smem();  // generic-proxy smem writes -> visible to wgmma (async proxy)
    __syncthreads();

    // ---- per-warpgroup persistent tile loop ----
    const int wg = tid >> 7;
    const int wtid = tid & 127;
    const int wwarp = wtid >> 5;
    const int g = lane >> 2;
    const int q4 = lane & 3;
    const uint32_t barid = 1u + (uint32_t)wg;
    unsigned char* buf = smem_wg + bbytes + (size_t)wg * bufbytes;
    float* sT = reinterpret_cast<float*>(buf);
    const uint32_t aBase = smem_u32(buf) +
                           (uint32_t)((wwarp * 16 + (lane & 15)) * C::RSB + 16 * (lane >> 4));
    const uint64_t dBase = desc_nosw(smem_u32(smem_wg));

    const int step = (int)gridDim.x * nwg;
    for (int t = (int)blockIdx.x + (int)gridDim.x * wg; t < T; t += step) {
        const int by = t / tilesX;
        const int bx = t - by * tilesX;
        const int r0 = by * C::OH;
        const int c0 = bx * C::OW;

        // 1. fp32 input tile (+halo) -> smem, zero-filled past the edges
        if (vec4) {
            constexpr int Q = C::SC / 4;
            const int total = trows * Q;
            for (int idx = wtid; idx < total; idx += 128) {
                const int rr = idx / Q;
                const int qq = idx - rr * Q;
                const int gr = r0 + rr;
                const int gc = c0 + 4 * qq;
                const bool ok = (gr < H) && (gc < W);  // W % 4 == 0: chunk fully in or out
                const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
                cp_async_16(sT + rr * C::RSF + 4 * qq, src, ok ? 16 : 0);
            }
        } else {
            const int total = trows * C::SC;
            for (int idx = wtid; idx < total; idx += 128) {
                const int rr = idx / C::SC;
                const int cc = idx - rr * C::SC;
                const int gr = r0 + rr;
                const int gc = c0 + cc;
                const bool ok = (gr < H) && (gc < W);
                const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
                cp_async_f32(sT + rr * C::RSF + cc, src, ok ? 4 : 0);
            }
        }
        cp_async_commit();
        cp_async_wait_all();
        bar_wg(barid);

        // 2. max |x| over the tile
        float amax = 0.0f;
        {
            constexpr int Q = C::SC / 4;
            const int total = trows * Q;
            for (int idx = wtid; idx < total; idx += 128) {
                const int rr = idx / Q;
                const int qq = idx - rr * Q;
                const float4 v = *reinterpret_cast<const float4*>(sT + rr * C::RSF + 4 * qq);
                amax = fmaxf(amax,
                             fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (lane == 0) sRed[16 + 4 * wg + wwarp] = amax;
        bar_wg(barid);
        amax = fmaxf(fmaxf(sRed[16 + 4 * wg + 0], sRed[16 + 4 * wg + 1]),
                     fmaxf(sRed[16 + 4 * wg + 2], sRed[16 + 4 * wg + 3]));
        const int ea = scale_exp(amax);
        const float sa = exp2i(ea);
        const float ua = exp2i(-ea);

        // 3. in-place conversion, one row per warp: fp32 row -> [hi SC halves][lo SC halves]
        {
            constexpr int NP2 = C::SC / 2;
            constexpr int NPL = (NP2 + 31) / 32;
            for (int rr = wwarp; rr < trows; rr += 4) {
                unsigned char* rowb = buf + (size_t)rr * C::RSB;
                const float2* rf = reinterpret_cast<const float2*>(rowb);
                uint32_t* rh = reinterpret_cast<uint32_t*>(rowb);
                uint32_t* rl = reinterpret_cast<uint32_t*>(rowb + 2 * C::SC);
                float2 v[NPL];
#pragma unroll
                for (int k = 0; k < NPL; ++k) {
                    const int p = lane + 32 * k;
                    v[k] = (p < NP2) ? rf[p] : make_float2(0.0f, 0.0f);
                }
                __syncwarp();
#pragma unroll
                for (int k = 0; k < NPL; ++k) {
                    const int p = lane + 32 * k;
                    if (p < NP2) {
                        __half hx, lx, hy, ly;
                        split_f16(v[k].x * sa, hx, lx);
                        split_f16(v[k].y * sa, hy, ly);
                        rh[p] = pack_h2(hx, hy);
                        rl[p] = pack_h2(lx, ly);
                    }
                }
                __syncwarp();
            }
        }
        bar_wg(barid);

        // 4. main loop: kernel rows x chunks, 3 wgmmas per chunk, two accumulator sets
        float sum[C::NB][4];
#pragma unroll
        for (int b = 0; b < C::NB; ++b) {
            sum[b][0] = 0.0f;
            sum[b][1] = 0.0f;
            sum[b][2] = 0.0f;
            sum[b][3] = 0.0f;
        }
        float tmp[2][C::NR];
#pragma unroll
        for (int i = 0; i < C::NR; ++i) {
            tmp[0][i] = 0.0f;
            tmp[1][i] = 0.0f;
        }
        uint32_t ah[2][4], al[2][4];
        ldsm_x4(ah[0], aBase);
        ldsm_x4(al[0], aBase + 2u * (uint32_t)C::SC);

#pragma unroll 1
        for (int m = 0; m < kh; ++m) {
            const uint32_t arow = aBase + (uint32_t)(m * C::RSB);
            const uint32_t arow_next = (m + 1 < kh) ? (arow + (uint32_t)C::RSB) : arow;
            const uint64_t dHi = dBase + (uint64_t)((uint32_t)m * (uint32_t)(C::BM_BYTES >> 4));
            const uint64_t dLo = dHi + (uint64_t)(C::NS * 8);
            ChunkRun<C, 0>::run(sum, tmp, ah, al, arow, arow_next, dHi, dLo);
        }
        wgmma_wait<0>();
        fence_regs(tmp[(C::NQ - 1) & 1]);
        flush_chunk<C, C::NQ - 1>(sum, tmp[(C::NQ - 1) & 1]);
        bar_wg(barid);  // all warps done reading the hi/lo tile

        // 5. epilogue: unscale, stage (reversed column order inside each 8-block), store
        float* sO = sT;
        {
            const int row = wwarp * 16 + g;
#pragma unroll
            for (int cb = 0; cb < C::NB; ++cb) {
                const int col = 8 * cb + 6 - 2 * q4;
                *reinterpret_cast<float2*>(sO + row * C::OST + col) =
                    make_float2((sum[cb][1] * ua) * uw, (sum[cb][0] * ua) * uw);
                *reinterpret_cast<float2*>(sO + (row + 8) * C::OST + col) =
                    make_float2((sum[cb][3] * ua) * uw, (sum[cb][2] * ua) * uw);
            }
        }
        bar_wg(barid);
        for (int rr = wwarp; rr < C::OH; rr += 4) {
            const int orow = r0 + rr;
            if (orow >= Ho) break;
            float* gout = out + (size_t)orow * (size_t)Wo + c0;
            const float* srow = sO + rr * C::OST;
#pragma unroll
            for (int k = 0; k < (C::OW + 31) / 32; ++k) {
                const int cc = lane + 32 * k;
                if (cc < C::OW && c0 + cc < Wo) gout[cc] = srow[cc];
            }
        }
        bar_wg(barid);  // staging reads done before the next tile's loads
    }
}

// ==========================================================================================
// Round-5 wgmma path: K = (2 kernel rows) x (8 input columns), interleaved hi/lo bands
// ==========================================================================================
//
// Per kernel row m the band holds 2*WN core matrices (WN = NB/8), stored hw_0, lw_0, hw_1, lw_1,
// ...; core s (hi or lo) element (i, j) = w[m][8s + i + j - 7] (i: N index, j: K index).
// For row pair p and 8-column chunk q of the tile:
//   A[r][k]  = x[r + 2p + (k >= 8)][8q + (k & 7)]                (ldmatrix.x4, rows m / m+1)
//   B[k][n'] = w[2p + (k >= 8)][(k & 7) + n' - 7],  output column c = 8q + 7 - n'.
// Descriptors (K-major, no swizzle): K-direction core stride (LBO) = one band (BAND bytes);
// N-direction core stride (SBO) = 128 B for #1 (hi and lo cores interleaved) and 256 B for #2
// (hi cores only).  swapLS swaps the two fields (tried by the self-test if the first fails).
// D n-block b of #1: even b -> hw block b/2, odd b -> lw block b/2; D2 n-block b -> hw block b.
// Output block cb (columns 8cb .. 8cb+7 of the tile) receives band block q - cb of chunk q.
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t kstride, uint32_t nstride,
                                              int swapLS) {
    const uint32_t lbo = swapLS ? nstride : kstride;
    const uint32_t sbo = swapLS ? kstride : nstride;
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32);
}

struct NwGeo {
    uint32_t aBase;   // A (hi plane) address of row pair 0, chunk 0 for this lane
    uint32_t rpstep;  // bytes per row pair (2 * RSB)
    uint32_t loff;    // lo plane offset within a row (2 * SC bytes)
    int P;            // row pairs (multiple of 4)
    int NQ;           // chunks per tile
    uint64_t d1b;     // descriptor: hx * [hw|lw], band start, row pair 0
    uint64_t d2b;     // descriptor: lx * hw
};

struct NwOut {
    float* outp;  // &out[orow0][c0 + 7 - 2*q4]
    size_t o8;    // 8 * Wo
    int lim;      // Wo - (c0 + 7 - 2*q4)
    int rok0;     // row orow0 < Ho
    int rok1;     // row orow0 + 8 < Ho
    float ua;
    float uw;
};

// window slot s holds output block (q - WN + 1 + s) == band block (WN - 1 - s) of chunk q
template <int NB, int NC, int A0>
__device__ __forceinline__ void nw_flush1(float (&wv)[NB / 8][4], const float (&d)[NB]) {
#pragma unroll
    for (int j = 0; j < NC / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
            wv[NB / 8 - 1 - A0 - j][e] += d[8 * j + e] + d[8 * j + 4 + e];
    }
}
template <int NB, int NC, int A0>
__device__ __forceinline__ void nw_flush2(float (&wv)[NB / 8][4], const float (&d)[NB / 2]) {
#pragma unroll
    for (int j = 0; j < NC / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) wv[NB / 8 - 1 - A0 - j][e] += d[4 * j + e];
    }
}
template <int WN>
__device__ __forceinline__ void nw_shift(float (&wv)[WN][4]) {
#pragma unroll
    for (int s = 0; s + 1 < WN; ++s) {
#pragma unroll
        for (int e = 0; e < 4; ++e) wv[s][e] = wv[s + 1][e];
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) wv[WN - 1][e] = 0.0f;
}
// write window slot 0 (output block cb) and shift the window.
// wv[0][0]: (row g, col 8cb+7-2q4), [1]: (row g, col -1), [2], [3]: same for row g+8
template <int WN>
__device__ __forceinline__ void nw_emit(float (&wv)[WN][4], int cb, const NwOut& O) {
    const int x = 8 * cb;
    const bool okc0 = x < O.lim;
    const bool okc1 = (x - 1) < O.lim;
    if (O.rok0) {
        float* p0 = O.outp + x;
        if (okc0) p0[0] = (wv[0][0] * O.ua) * O.uw;
        if (okc1) p0[-1] = (wv[0][1] * O.ua) * O.uw;
    }
    if (O.rok1) {
        float* p1 = O.outp + O.o8 + x;
        if (okc0) p1[0] = (wv[0][2] * O.ua) * O.uw;
        if (okc1) p1[-1] = (wv[0][3] * O.ua) * O.uw;
    }
    nw_shift<WN>(wv);
}

// One chunk: all row pairs, NC band columns starting at band block A0.
// Entry: ah[0]/al[0] hold row pair 0 of this chunk; exit: they hold row pair 0 of chunk q+1.
// CH2: D1 buffer chains 2 row pairs before its flush (else 1).
template <int NB, int NC, int A0, bool CH2>
__device__ __forceinline__ void nw_chunk(float (&wv)[NB / 8][4], float (&D1)[2][NB],
                                         float (&D2)[NB / 2], uint32_t (&ah)[2][4],
                                         uint32_t (&al)[2][4], const NwGeo& G, int q) {
    constexpr uint64_t S1 = (uint64_t)(32 * (NB / 8));  // one row pair of bands, encoded (>>4)
    const uint32_t a0 = G.aBase + 16u * (uint32_t)q;
    const uint32_t rps = G.rpstep;
    const uint32_t loff = G.loff;
    const int P = G.P;
    uint64_t d1 = G.d1b + (uint64_t)(16 * A0);
    uint64_t d2 = G.d2b + (uint64_t)(16 * A0);
    uint32_t an = a0 + rps;

#pragma unroll 1
    for (int p = 0; p < P; p += 4) {
        // ---- group p: D1[0] fresh, A buffer 0 ----
        fence_regs(D1[0]);
        wgmma_fence();
        wg_mma(IntTag<2 * NC>(), D1[0], ah[0], d1, 0);
        wg_mma(IntTag<NC>(), D2, al[0], d2, p);
        wgmma_commit();
        wgmma_wait<1>();  // group p-1 complete
        if (p > 0) {
            fence_regs(D1[1]);
            nw_flush1<NB, NC, A0>(wv, D1[1]);
        }
        ldsm_x4(ah[1], an);
        ldsm_x4(al[1], an + loff);
        an += rps;

        // ---- group p+1: A buffer 1 ----
        if (CH2) {
            wgmma_fence();
            wg_mma(IntTag<2 * NC>(), D1[0], ah[1], d1 + S1, 1);
        } else {
            fence_regs(D1[1]);
            wgmma_fence();
            wg_mma(IntTag<2 * NC>(), D1[1], ah[1], d1 + S1, 0);
        }
        wg_mma(IntTag<NC>(), D2, al[1], d2 + S1, 1);
        wgmma_commit();
        wgmma_wait<1>();  // group p complete
        if (!CH2) {
            fence_regs(D1[0]);
            nw_flush1<NB, NC, A0>(wv, D1[0]);
        }
        ldsm_x4(ah[0], an);
        ldsm_x4(al[0], an + loff);
        an += rps;

        // ---- group p+2: A buffer 0 ----
        if (CH2) {
            fence_regs(D1[1]);
            wgmma_fence();
            wg_mma(IntTag<2 * NC>(), D1[1], ah[0], d1 + 2 * S1, 0);
        } else {
            fence_regs(D1[0]);
            wgmma_fence();
            wg_mma(IntTag<2 * NC>(), D1[0], ah[0], d1 + 2 * S1, 0);
        }
        wg_mma(IntTag<NC>(), D2, al[0], d2 + 2 * S1, 1);
        wgmma_commit();
        wgmma_wait<1>();  // group p+1 complete
        if (CH2) {
            fence_regs(D1[0]);
            nw_flush1<NB, NC, A0>(wv, D1[0]);
        } else {
            fence_regs(D1[1]);
            nw_flush1<NB, NC, A0>(wv, D1[1]);
        }
        ldsm_x4(ah[1], an);
        ldsm_x4(al[1], an + loff);
        an += rps;

        // ---- group p+3: A buffer 1 ----
        if (CH2) {
            wgmma_fence();
            wg_mma(IntTag<2 * NC>(), D1[1], ah[1], d1 + 3 * S1, 1);
        } else {
            fence_regs(D1[1]);
            wgmma_fence();
            wg_mma(IntTag<2 * NC>(), D1[1], ah[1], d1 + 3 * S1, 0);
        }
        wg_mma(IntTag<NC>(), D2, al[1], d2 + 3 * S1, 1);
        wgmma_commit();
        d1 += 4 * S1;
        d2 += 4 * S1;
        wgmma_wait<1>();  // group p+2 complete
        if (!CH2) {
            fence_regs(D1[0]);
            nw_flush1<NB, NC, A0>(wv, D1[0]);
        }
        // next row pair of this chunk, or row pair 0 of the next chunk
        const uint32_t nx = (p + 4 < P) ? an : (a0 + 16u);
        ldsm_x4(ah[0], nx);
        ldsm_x4(al[0], nx + loff);
        an += rps;
    }
    wgmma_wait<0>();
    fence_regs(D1[1]);
    nw_flush1<NB, NC, A0>(wv, D1[1]);
    fence_regs(D2);
    nw_flush2<NB, NC, A0>(wv, D2);
}

// left-edge chunks q = 0 .. WN-2: band blocks 0..q, nothing complete yet
template <int NB, bool CH2, int Q, bool GO = (Q < NB / 8 - 1)>
struct NwLeft {
    static __device__ __forceinline__ void run(float (&wv)[NB / 8][4], float (&D1)[2][NB],
                                               float (&D2)[NB / 2], uint32_t (&ah)[2][4],
                                               uint32_t (&al)[2][4], const NwGeo& G) {
        nw_chunk<NB, 8 * (Q + 1), 0, CH2>(wv, D1, D2, ah, al, G, Q);
        nw_shift<NB / 8>(wv);
        NwLeft<NB, CH2, Q + 1>::run(wv, D1, D2, ah, al, G);
    }
};
template <int NB, bool CH2, int Q>
struct NwLeft<NB, CH2, Q, false> {
    static __device__ __forceinline__ void run(float (&)[NB / 8][4], float (&)[2][NB],
                                               float (&)[NB / 2], uint32_t (&)[2][4],
                                               uint32_t (&)[2][4], const NwGeo&) {}
};

// right-edge chunks q = NQ - WN + E (E = 1 .. WN-1): band blocks E .. WN-1
template <int NB, bool CH2, int E, bool GO = (E < NB / 8)>
struct NwRight {
    static __device__ __forceinline__ void run(float (&wv)[NB / 8][4], float (&D1)[2][NB],
                                               float (&D2)[NB / 2], uint32_t (&ah)[2][4],
                                               uint32_t (&al)[2][4], const NwGeo& G,
                                               const NwOut& O) {
        const int q = G.NQ - NB / 8 + E;
        nw_chunk<NB, NB - 8 * E, E, CH2>(wv, D1, D2, ah, al, G, q);
        nw_emit<NB / 8>(wv, q - NB / 8 + 1, O);
        NwRight<NB, CH2, E + 1>::run(wv, D1, D2, ah, al, G, O);
    }
};
template <int NB, bool CH2, int E>
struct NwRight<NB, CH2, E, false> {
    static __device__ __forceinline__ void run(float (&)[NB / 8][4], float (&)[2][NB],
                                               float (&)[NB / 2], uint32_t (&)[2][4],
                                               uint32_t (&)[2][4], const NwGeo&,
                                               const NwOut&) {}
};

// Persistent kernel: blockDim = 128 * nwg (nwg <= MAXWG); each warpgroup processes its own
// 64 x OW output tiles (static round robin); the weight bands are shared by the CTA.
template <int NB, int MAXWG, bool CH2>
__global__ void __launch_bounds__(128 * MAXWG, 1)
conv2d_nw(const float* __restrict__ in, const float* __restrict__ ker, float* __restrict__ out,
          int H, int W, int kh, int kw, int Ho, int Wo, int OW, int tilesX, int T, int vec4,
          int swapLS) {
    constexpr int WN = NB / 8;
    constexpr int BAND = 2 * WN * 128;  // bytes per kernel row
    extern __shared__ __align__(128) unsigned char smem_nw[];

    const int tid = threadIdx.x;
    const int nthr = blockDim.x;
    const int nwg = nthr >> 7;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int khp = (kh + 7) & ~7;     // kernel rows padded with zero bands
    const int trows = 63 + khp;        // staged input rows
    const int NQ = (OW >> 3) + WN - 1; // 8-column chunks per tile
    const int SC = 8 * NQ;             // staged columns
    const int RSB = 4 * SC + 16;       // row stride (bytes), odd multiple of 16
    const int RSF = RSB >> 2;
    const size_t bbytes = (size_t)khp * (size_t)BAND;
    const size_t bufbytes = (size_t)trows * (size_t)RSB;
    uint32_t* sB = reinterpret_cast<uint32_t*>(smem_nw);
    float* sRed = reinterpret_cast<float*>(smem_nw + bbytes + (size_t)nwg * bufbytes);

    // ---- CTA prologue 1: max |w| ----
    float wmax = 0.0f;
    const int nk = kh * kw;
    for (int i = tid; i < nk; i += nthr) wmax = fmaxf(wmax, fabsf(__ldg(ker + i)));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) wmax = fmaxf(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
    if (lane == 0) sRed[warp] = wmax;
    __syncthreads();
    wmax = 0.0f;
    for (int i = 0; i < (nthr >> 5); ++i) wmax = fmaxf(wmax, sRed[i]);
    const int ew = scale_exp(wmax);
    const float sw = exp2i(ew);
    const float uw = exp2i(-ew);

    // ---- CTA prologue 2: interleaved bands; core (m, s, h) element (i, j) = w[m][8s+i+j-7] ----
    {
        const int nwords = khp * (2 * WN) * 32;
        for (int idx = tid; idx < nwords; idx += nthr) {
            const int jp = idx & 3;
            const int i = (idx >> 2) & 7;
            const int rest = idx >> 5;  // m * 2WN + core
            const int core = rest % (2 * WN);
            const int m = rest / (2 * WN);
            const int s = core >> 1;
            const int h = core & 1;
            const int e0 = 8 * s + i + 2 * jp - 7;
            float v0 = 0.0f, v1 = 0.0f;
            if (m < kh) {
                const float* wrow = ker + (size_t)m * (size_t)kw;
                if (e0 >= 0 && e0 < kw) v0 = __ldg(wrow + e0) * sw;
                if (e0 + 1 >= 0 && e0 + 1 < kw) v1 = __ldg(wrow + e0 + 1) * sw;
            }
            __half h0, l0, h1, l1;
            split_f16(v0, h0, l0);
            split_f16(v1, h1, l1);
            sB[idx] = h ? pack_h2(l0, l1) : pack_h2(h0, h1);
        }
    }
    fence_proxy_async_smem();  // generic-proxy smem writes -> visible to wgmma (async proxy)
    __syncthreads();

    // ---- per-warpgroup state ----
    const int wg = tid >> 7;
    const int wtid = tid & 127;
    const int wwarp = wtid >> 5;
    const int g = lane >> 2;
    const int q4 = lane & 3;
    const uint32_t barid = 1u + (uint32_t)wg;
    unsigned char* buf = smem_nw + bbytes + (size_t)wg * bufbytes;
    float* sT = reinterpret_cast<float*>(buf);

    NwGeo G;
    G.aBase = smem_u32(buf) + (uint32_t)((16 * wwarp + (lane & 15) + (lane >> 4)) * RSB);
    G.rpstep = (uint32_t)(2 * RSB);
    G.loff = (uint32_t)(2 * SC);
    G.P = khp >> 1;
    G.NQ = NQ;
    {
        const uint32_t sBa = smem_u32(smem_nw);
        G.d1b = make_desc(sBa, (uint32_t)BAND, 128u, swapLS);
        G.d2b = make_desc(sBa, (uint32_t)BAND, 256u, swapLS);
    }

    float D1[2][NB];
    float D2[NB / 2];
    float wv[WN][4];
    uint32_t ah[2][4], al[2][4];
#pragma unroll
    for (int i = 0; i < NB; ++i) {
        D1[0][i] = 0.0f;
        D1[1][i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < NB / 2; ++i) D2[i] = 0.0f;

    const int step = (int)gridDim.x * nwg;
    for (int t = (int)blockIdx.x + (int)gridDim.x * wg; t < T; t += step) {
        const int by = t / tilesX;
        const int bx = t - by * tilesX;
        const int r0 = by * 64;
        const int c0 = bx * OW;

        // 1. fp32 input tile (+halo) -> smem, zero-filled past the edges
        if (vec4) {
            const int Q4 = SC >> 2;
            for (int rr = wwarp; rr < trows; rr += 4) {
                const int gr = r0 + rr;
                const bool rok = gr < H;
                const float* grow = in + (size_t)(rok ? gr : 0) * (size_t)W;
                float* srow = sT + (size_t)rr * RSF;
                for (int qq = lane; qq < Q4; qq += 32) {
                    const int gc = c0 + 4 * qq;
                    const bool ok = rok && (gc < W);  // W % 4 == 0: chunk fully in or out
                    const float* src = ok ? (grow + gc) : in;
                    cp_async_16(srow + 4 * qq, src, ok ? 16 : 0);
                }
            }
        } else {
            for (int rr = wwarp; rr < trows; rr += 4) {
                const int gr = r0 + rr;
                const bool rok = gr < H;
                const float* grow = in + (size_t)(rok ? gr : 0) * (size_t)W;
                float* srow = sT + (size_t)rr * RSF;
                for (int cc = lane; cc < SC; cc += 32) {
                    const int gc = c0 + cc;
                    const bool ok = rok && (gc < W);
                    const float* src = ok ? (grow + gc) : in;
                    cp_async_f32(srow + cc, src, ok ? 4 : 0);
                }
            }
        }
        cp_async_commit();
        cp_async_wait_all();
        bar_wg(barid);

        // 2. max |x| over the tile
        float amax = 0.0f;
        {
            const int Q4 = SC >> 2;
            for (int rr = wwarp; rr < trows; rr += 4) {
                const float* srow = sT + (size_t)rr * RSF;
                for (int qq = lane; qq < Q4; qq += 32) {
                    const float4 v = *reinterpret_cast<const float4*>(srow + 4 * qq);
                    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)),
                                             fmaxf(fabsf(v.z), fabsf(v.w))));
                }
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (lane == 0) sRed[16 + 4 * wg + wwarp] = amax;
        bar_wg(barid);
        amax = fmaxf(fmaxf(sRed[16 + 4 * wg + 0], sRed[16 + 4 * wg + 1]),
                     fmaxf(sRed[16 + 4 * wg + 2], sRed[16 + 4 * wg + 3]));
        const int ea = scale_exp(amax);
        const float sa = exp2i(ea);
        const float ua = exp2i(-ea);

        // 3. in-place conversion, one row per warp: fp32 row -> [hi SC halves][lo SC halves]
        {
            const int NP2 = SC >> 1;  // <= 128
            for (int rr = wwarp; rr < trows; rr += 4) {
                unsigned char* rowb = buf + (size_t)rr * RSB;
                const float2* rf = reinterpret_cast<const float2*>(rowb);
                uint32_t* rh = reinterpret_cast<uint32_t*>(rowb);
                uint32_t* rl = reinterpret_cast<uint32_t*>(rowb + 2 * SC);
                float2 v[4];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int p = lane + 32 * k;
                    v[k] = (p < NP2) ? rf[p] : make_float2(0.0f, 0.0f);
                }
                __syncwarp();
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int p = lane + 32 * k;
                    if (p < NP2) {
                        __half hx, lx, hy, ly;
                        split_f16(v[k].x * sa, hx, lx);
                        split_f16(v[k].y * sa, hy, ly);
                        rh[p] = pack_h2(hx, hy);
                        rl[p] = pack_h2(lx, ly);
                    }
                }
                __syncwarp();
            }
        }
        bar_wg(barid);

        // 4. main loop: chunks (left edge, interior, right edge) x row pairs
        NwOut O;
        {
            const int orow0 = r0 + 16 * wwarp + g;
            const int cbase = c0 + 7 - 2 * q4;
            O.rok0 = (orow0 < Ho) ? 1 : 0;
            O.rok1 = (orow0 + 8 < Ho) ? 1 : 0;
            O.outp = out + (size_t)(O.rok0 ? orow0 : 0) * (size_t)Wo + cbase;
            O.o8 = (size_t)8 * (size_t)Wo;
            O.lim = Wo - cbase;
            O.ua = ua;
            O.uw = uw;
        }
#pragma unroll
        for (int s = 0; s < WN; ++s) {
            wv[s][0] = 0.0f;
            wv[s][1] = 0.0f;
            wv[s][2] = 0.0f;
            wv[s][3] = 0.0f;
        }
        ldsm_x4(ah[0], G.aBase);
        ldsm_x4(al[0], G.aBase + G.loff);

        NwLeft<NB, CH2, 0>::run(wv, D1, D2, ah, al, G);
#pragma unroll 1
        for (int q = WN - 1; q <= NQ - WN; ++q) {
            nw_chunk<NB, NB, 0, CH2>(wv, D1, D2, ah, al, G, q);
            nw_emit<WN>(wv, q - WN + 1, O);
        }
        NwRight<NB, CH2, 1>::run(wv, D1, D2, ah, al, G, O);

        bar_wg(barid);  // all warps done reading the tile before the next tile's loads
    }
}

// ------------------------------------------------------------------------------------------
// Self-test / verification kernels
// ------------------------------------------------------------------------------------------
__global__ void fill_hash_kernel(float* p, int n, uint32_t seed, int pos) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
        const float u = (float)(x >> 8) * (1.0f / 16777216.0f);
        p[i] = pos ? u : (u * 2.0f - 1.0f);
    }
}
__global__ void mismatch_kernel(const float* a, const float* ref, int n, int* bad) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float d = fabsf(a[i] - ref[i]);
        if (!(d <= 1e-3f * (1.0f + fabsf(ref[i])))) atomicAdd(bad, 1);
    }
}
// fp64 reference value and magnitude (sum of |terms|)
__global__ void ref64_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                             double* __restrict__ ref, double* __restrict__ mag, int W, int kh,
                             int kw, int Ho, int Wo) {
    const long long n = (long long)Ho * (long long)Wo;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int r = (int)(i / Wo);
    const int c = (int)(i - (long long)r * Wo);
    double s = 0.0, m = 0.0;
    for (int a = 0; a < kh; ++a) {
        const float* rp = in + (size_t)(r + a) * (size_t)W + c;
        const float* kp = ker + (size_t)a * (size_t)kw;
        for (int b = 0; b < kw; ++b) {
            const double pr = (double)rp[b] * (double)kp[b];
            s += pr;
            m += fabs(pr);
        }
    }
    ref[i] = s;
    mag[i] = m;
}
// the real criterion, at half the tolerance
__global__ void check64_kernel(const float* __restrict__ got, const double* __restrict__ ref,
                               const double* __restrict__ mag, long long n, int* bad) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double d = fabs((double)got[i] - ref[i]);
    const double tol = 0.5 * (1e-7 + 1e-6 * fabs(ref[i]) + 1e-6 * mag[i]);
    if (!(d <= tol)) atomicAdd(bad, 1);
}
__global__ void absmax_kernel(const float* __restrict__ a, long long n, unsigned int* mx) {
    __shared__ float red[32];
    float m = 0.0f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(a[i]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = 0.0f;
        for (int k = 0; k < (int)(blockDim.x >> 5); ++k) r = fmaxf(r, red[k]);
        atomicMax(mx, __float_as_uint(r));
    }
}
// layout-bug check of a candidate against the round-3 result on the real data
__global__ void mismatch_scaled_kernel(const float* __restrict__ a, const float* __restrict__ ref,
                                       long long n, const unsigned int* mx, int* bad) {
    const float S = __uint_as_float(*mx);
    int cnt = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float d = fabsf(a[i] - ref[i]);
        if (!(d <= 1e-3f * fabsf(ref[i]) + 1e-4f * S)) ++cnt;
    }
    if (cnt) atomicAdd(bad, cnt);
}

// ------------------------------------------------------------------------------------------
// Host side
// ------------------------------------------------------------------------------------------
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

unsigned blocks_for(size_t n) {
    size_t b = (n + 255) / 256;
    if (b > 4096) b = 4096;
    if (b < 1) b = 1;
    return (unsigned)b;
}

template <int NC, bool SHARED, int KS>
bool launch_tc(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
               int Ho, int Wo) {
    using C = TcCfg<NC, SHARED, KS>;
    const size_t smem = tc_smem_bytes<C>(kh, kw);
    const int limit = smem_optin_limit();
    if (smem > (size_t)limit) return false;

    const long long tilesX = ((long long)Wo + C::TILE_W - 1) / C::TILE_W;
    const long long tilesY = ((long long)Ho + C::TILE_H - 1) / C::TILE_H;
    const long long nblocks = tilesX * tilesY;
    if (nblocks <= 0 || nblocks > 0x7fffffffLL) return false;

    static bool configured = false;
    if (!configured) {
        if (cudaFuncSetAttribute(conv2d_tc<NC, SHARED, KS>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 limit) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        cudaFuncSetAttribute(conv2d_tc<NC, SHARED, KS>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        cudaGetLastError();
        configured = true;
    }
    const int vec4 =
        (((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0)) ? 1 : 0;
    conv2d_tc<NC, SHARED, KS><<<(unsigned)nblocks, NTHREADS, smem>>>(
        in, ker, out, H, W, kh, kw, Ho, Wo, (int)tilesX, vec4);
    return cudaGetLastError() == cudaSuccess;
}

// Split the kernel rows over two warp groups (32-row tiles) when 64-row tiles would not
// give every SM two blocks.
template <int NC, bool SHARED>
bool launch_tc_auto(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
                    int Ho, int Wo) {
    const long long tilesX = ((long long)Wo + 127) / 128;
    const long long tiles64 = tilesX * (((long long)Ho + 63) / 64);
    if (tiles64 < 2LL * num_sms()) {
        if (launch_tc<NC, SHARED, 2>(in, ker, out, H, W, kh, kw, Ho, Wo)) return true;
    }
    return launch_tc<NC, SHARED, 1>(in, ker, out, H, W, kh, kw, Ho, Wo);
}

template <int KWP>
bool launch_tiled(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
                  int Ho, int Wo) {
    using Cf = Cfg<KWP>;
    const size_t smem =
        ((size_t)kh * KWP + (size_t)(S_TILE_H + kh - 1) * (size_t)Cf::STRIDE) * sizeof(float);
    const int limit = smem_optin_limit();
    if (smem > (size_t)limit) return false;

    const long long tilesX = ((long long)Wo + S_TILE_W - 1) / S_TILE_W;
    const long long tilesY = ((long long)Ho + S_TILE_H - 1) / S_TILE_H;
    const long long nblocks = tilesX * tilesY;
    if (nblocks <= 0 || nblocks > 0x7fffffffLL) return false;

    static bool configured = false;
    if (!configured) {
        cudaFuncSetAttribute(conv2d_tiled<KWP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             limit);
        cudaFuncSetAttribute(conv2d_tiled<KWP>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        cudaGetLastError();
        configured = true;
    }
    conv2d_tiled<KWP><<<(unsigned)nblocks, NTHREADS, smem>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                              (int)tilesX);
    return cudaGetLastError() == cudaSuccess;
}

// Round-3 dispatch (always produces the result).
void run_old(const float* input, const float* kernel, float* output, int H, int W, int kh,
             int kw, int Ho, int Wo) {
    bool done = false;
    if (kw <= 9)
        done = launch_tc_auto<1, false>(input, kernel, output, H, W, kh, kw, Ho, Wo);
    else if (kw <= 17)
        done = launch_tc_auto<2, true>(input, kernel, output, H, W, kh, kw, Ho, Wo);
    else if (kw <= 25)
        done = launch_tc_auto<2, false>(input, kernel, output, H, W, kh, kw, Ho, Wo);
    else if (kw <= 33)
        done = launch_tc_auto<3, true>(input, kernel, output, H, W, kh, kw, Ho, Wo);
    else if (kw <= 41)
        done = launch_tc_auto<3, false>(input, kernel, output, H, W, kh, kw, Ho, Wo);

    if (!done) {
        if (kw <= 4)
            done = launch_tiled<4>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        else if (kw <= 8)
            done = launch_tiled<8>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        else if (kw <= 16)
            done = launch_tiled<16>(input, kernel, output, H, W, kh, kw, Ho, Wo);
        else if (kw <= 32)
            done = launch_tiled<32>(input, kernel, output, H, W, kh, kw, Ho, Wo);
    }
    if (!done) {
        dim3 block(16, 16);
        dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y);
        conv2d_naive<<<grid, block>>>(input, kernel, output, W, kh, kw, Ho, Wo);
    }
}

// ---- round-4 wgmma path host side ----
typedef WgCfg<2, 112> WgA;  // 10 <= kw <= 17  (N = 32)
typedef WgCfg<4, 96> WgB;   // 18 <= kw <= 33  (N = 48)

template <class C>
size_t wg_smem_bytes(int kh, int nwg) {
    return (size_t)kh * (size_t)C::BM_BYTES +
           (size_t)nwg * (size_t)(C::OH + kh - 1) * (size_t)C::RSB + 64 * sizeof(float);
}

template <class C>
bool launch_wg(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
               int Ho, int Wo, int grid_override) {
    const int limit = smem_optin_limit();
    int nwg = 3;
    while (nwg > 0 && wg_smem_bytes<C>(kh, nwg) > (size_t)limit) --nwg;
    if (nwg <= 0) return false;
    const size_t smem = wg_smem_bytes<C>(kh, nwg);

    const long long ow = (long long)C::OW;
    const long long oh = (long long)C::OH;
    const long long tilesX = ((long long)Wo + ow - 1) / ow;
    const long long tilesY = ((long long)Ho + oh - 1) / oh;
    const long long T = tilesX * tilesY;
    if (T <= 0 || T > (1LL << 30)) return false;

    static bool configured = false;
    if (!configured) {
        if (cudaFuncSetAttribute(conv2d_wg<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 limit) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        cudaFuncSetAttribute(conv2d_wg<C>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        cudaGetLastError();
        configured = true;
    }
    long long grid = (T + nwg - 1) / nwg;
    if (grid > (long long)num_sms()) grid = num_sms();
    if (grid_override > 0 && grid > grid_override) grid = grid_override;
    if (grid < 1) grid = 1;
    const int vec4 =
        (((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0)) ? 1 : 0;
    conv2d_wg<C><<<(unsigned)grid, 128 * nwg, smem>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                       (int)tilesX, (int)T, vec4);
    return cudaGetLastError() == cudaSuccess;
}

int wg_kind(int kw) {
    if (kw >= 10 && kw <= 17) return 1;
    if (kw >= 18 && kw <= 33) return 2;
    return 0;
}

bool launch_wg_kind(int kind, const float* in, const float* ker, float* out, int H, int W,
                    int kh, int kw, int Ho, int Wo, int grid_override) {
    if (kind == 1) return launch_wg<WgA>(in, ker, out, H, W, kh, kw, Ho, Wo, grid_override);
    if (kind == 2) return launch_wg<WgB>(in, ker, out, H, W, kh, kw, Ho, Wo, grid_override);
    return false;
}

long long wg_tiles(int kind, int Ho, int Wo) {
    const long long ow = (kind == 1) ? (long long)(+WgA::OW) : (long long)(+WgB::OW);
    return (((long long)Ho + 63) / 64) * (((long long)Wo + ow - 1) / ow);
}

// One self-test problem: round-4 wgmma path vs the round-3 path.
bool wg_selftest_one(int kind, int H, int W, int kh, int kw) {
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    const size_t nin = (size_t)H * W, nk = (size_t)kh * kw, nout = (size_t)Ho * Wo;
    const size_t rin = (nin + 63) & ~(size_t)63;
    const size_t rk = (nk + 63) & ~(size_t)63;
    const size_t rout = (nout + 63) & ~(size_t)63;
    float* base = nullptr;
    if (cudaMalloc(&base, (rin + rk + 2 * rout + 64) * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    float* d_in = base;
    float* d_k = d_in + rin;
    float* o1 = d_k + rk;
    float* o2 = o1 + rout;
    int* d_bad = reinterpret_cast<int*>(o2 + rout);
    fill_hash_kernel<<<(unsigned)((nin + 255) / 256), 256>>>(d_in, (int)nin, 0x12345679u, 0);
    fill_hash_kernel<<<(unsigned)((nk + 255) / 256), 256>>>(d_k, (int)nk, 0x9e3779b9u, 0);
    cudaMemset(o1, 0xFF, nout * sizeof(float));
    cudaMemset(o2, 0xFF, nout * sizeof(float));
    cudaMemset(d_bad, 0, sizeof(int));
    run_old(d_in, d_k, o1, H, W, kh, kw, Ho, Wo);
    bool ok = launch_wg_kind(kind, d_in, d_k, o2, H, W, kh, kw, Ho, Wo, 2);
    if (ok) mismatch_kernel<<<(unsigned)((nout + 255) / 256), 256>>>(o2, o1, (int)nout, d_bad);
    int hbad = 1;
    if (cudaMemcpy(&hbad, d_bad, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) ok = false;
    if (cudaDeviceSynchronize() != cudaSuccess) ok = false;
    if (cudaGetLastError() != cudaSuccess) ok = false;
    cudaFree(base);
    return ok && hbad == 0;
}

bool wg_selftest(int kind) {
    if (kind == 1) {
        return wg_selftest_one(1, 200, 300, 16, 16) &&   // vec4 loads, several tiles per WG
               wg_selftest_one(1, 149, 251, 5, 11);      // scalar loads, odd sizes
    }
    if (kind == 2) {
        return wg_selftest_one(2, 220, 332, 32, 32) &&
               wg_selftest_one(2, 157, 263, 5, 27);
    }
    return false;
}

// ---- round-5 path host side ----
// class 0: kw <= 9 (NB = 16), class 1: kw <= 17 (NB = 24), class 2: kw <= 33 (NB = 40)
int nw_class(int kw) {
    if (kw <= 0) return -1;
    if (kw <= 9) return 0;
    if (kw <= 17) return 1;
    if (kw <= 33) return 2;
    return -1;
}
int nw_nb(int cls) { return cls == 0 ? 16 : (cls == 1 ? 24 : 40); }

size_t nw_smem(int NB, int kh, int OW, int nwg) {
    const size_t khp = (size_t)((kh + 7) & ~7);
    const size_t band = (size_t)(NB / 8) * 256;
    const size_t SC = (size_t)OW + (size_t)NB - 8;
    return khp * band + (size_t)nwg * (63 + khp) * (4 * SC + 16) + 64 * sizeof(float);
}

// number of warpgroups per CTA that fit (0: configuration not possible)
int nw_nwg_fit(int NB, int maxwg, int kh, int kw, int OW) {
    if (kw < 1 || kw + 7 > NB || kh < 1 || kh > 1024) return 0;
    if ((OW & 7) != 0 || OW < NB || OW + NB - 8 > 256) return 0;
    const size_t limit = (size_t)smem_optin_limit();
    int n = maxwg;
    while (n > 0 && nw_smem(NB, kh, OW, n) > limit) --n;
    return n;
}

template <int NB, int MAXWG, bool CH2>
bool launch_nw(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
               int Ho, int Wo, int OW, int grid_override, bool force_nwg, int swapLS) {
    const int fit = nw_nwg_fit(NB, MAXWG, kh, kw, OW);
    if (fit <= 0) return false;
    const long long tilesX = ((long long)Wo + OW - 1) / OW;
    const long long tilesY = ((long long)Ho + 63) / 64;
    const long long T = tilesX * tilesY;
    if (T <= 0 || T > (1LL << 30)) return false;
    const int sms = num_sms();
    int nwg = fit;
    if (!force_nwg) {
        const long long need = (T + sms - 1) / sms;
        if (need < (long long)nwg) nwg = (int)need;
        if (nwg < 1) nwg = 1;
    }
    long long grid = (T + nwg - 1) / nwg;
    if (grid > (long long)sms) grid = sms;
    if (grid_override > 0 && grid > grid_override) grid = grid_override;
    if (grid < 1) grid = 1;

    const int limit = smem_optin_limit();
    static bool configured = false;
    if (!configured) {
        if (cudaFuncSetAttribute(conv2d_nw<NB, MAXWG, CH2>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 limit) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        cudaFuncSetAttribute(conv2d_nw<NB, MAXWG, CH2>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        cudaGetLastError();
        configured = true;
    }
    const size_t smem = nw_smem(NB, kh, OW, nwg);
    const int vec4 =
        (((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0)) ? 1 : 0;
    conv2d_nw<NB, MAXWG, CH2><<<(unsigned)grid, 128 * nwg, smem>>>(
        in, ker, out, H, W, kh, kw, Ho, Wo, OW, (int)tilesX, (int)T, vec4, swapLS);
    return cudaGetLastError() == cudaSuccess;
}

bool launch_nw_any(int cls, int mw, int ch2, const float* in, const float* ker, float* out,
                   int H, int W, int kh, int kw, int Ho, int Wo, int OW, int grid_override,
                   bool force_nwg, int swapLS) {
    if (cls == 0) {
        return ch2 ? launch_nw<16, 3, true>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                            grid_override, force_nwg, swapLS)
                   : launch_nw<16, 3, false>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                             grid_override, force_nwg, swapLS);
    }
    if (cls == 1) {
        return ch2 ? launch_nw<24, 3, true>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                            grid_override, force_nwg, swapLS)
                   : launch_nw<24, 3, false>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                             grid_override, force_nwg, swapLS);
    }
    if (cls == 2) {
        if (mw == 2) {
            return ch2 ? launch_nw<40, 2, true>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                                grid_override, force_nwg, swapLS)
                       : launch_nw<40, 2, false>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                                 grid_override, force_nwg, swapLS);
        }
        return ch2 ? launch_nw<40, 3, true>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                            grid_override, force_nwg, swapLS)
                   : launch_nw<40, 3, false>(in, ker, out, H, W, kh, kw, Ho, Wo, OW,
                                             grid_override, force_nwg, swapLS);
    }
    return false;
}

// per (class, max-warpgroup variant): 0 untested, 1 ok, -1 disabled
int g_nw_status[3][2] = {{0, 0}, {0, 0}, {0, 0}};
int g_nw_ch2[3][2] = {{1, 1}, {1, 1}, {1, 1}};
int g_nw_swap[3][2] = {{0, 0}, {0, 0}, {0, 0}};
int g_wg_status[3] = {0, 0, 0};  // round-4 path per kind

struct NwTest {
    int H, W, kh, kw, ow, pos;
};

// One self-test problem against the fp64 reference (half the real tolerance).
bool nw_selftest_one(int cls, int mw, int ch2, int swapLS, const NwTest& t) {
    const int H = t.H, W = t.W, kh = t.kh, kw = t.kw;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (Ho <= 0 || Wo <= 0) return false;
    const size_t nin = (size_t)H * W, nk = (size_t)kh * kw, nout = (size_t)Ho * Wo;
    float* d_in = nullptr;
    float* d_k = nullptr;
    float* d_o = nullptr;
    double* d_ref = nullptr;
    double* d_mag = nullptr;
    int* d_bad = nullptr;
    bool ok = true;
    if (cudaMalloc(&d_in, nin * sizeof(float)) != cudaSuccess) { d_in = nullptr; ok = false; }
    if (ok && cudaMalloc(&d_k, nk * sizeof(float)) != cudaSuccess) { d_k = nullptr; ok = false; }
    if (ok && cudaMalloc(&d_o, nout * sizeof(float)) != cudaSuccess) { d_o = nullptr; ok = false; }
    if (ok && cudaMalloc(&d_ref, nout * sizeof(double)) != cudaSuccess) {
        d_ref = nullptr;
        ok = false;
    }
    if (ok && cudaMalloc(&d_mag, nout * sizeof(double)) != cudaSuccess) {
        d_mag = nullptr;
        ok = false;
    }
    if (ok && cudaMalloc(&d_bad, sizeof(int)) != cudaSuccess) { d_bad = nullptr; ok = false; }
    if (ok) {
        fill_hash_kernel<<<(unsigned)((nin + 255) / 256), 256>>>(
            d_in, (int)nin, 0x2545F491u ^ (uint32_t)(H * 977 + W), t.pos);
        fill_hash_kernel<<<(unsigned)((nk + 255) / 256), 256>>>(
            d_k, (int)nk, 0x9E3779B9u ^ (uint32_t)(kh * 131 + kw), t.pos);
        ref64_kernel<<<(unsigned)((nout + 127) / 128), 128>>>(d_in, d_k, d_ref, d_mag, W, kh, kw,
                                                              Ho, Wo);
        cudaMemset(d_o, 0xFF, nout * sizeof(float));
        cudaMemset(d_bad, 0, sizeof(int));
        ok = launch_nw_any(cls, mw, ch2, d_in, d_k, d_o, H, W, kh, kw, Ho, Wo, t.ow, 2, true,
                           swapLS);
        if (ok)
            check64_kernel<<<(unsigned)((nout + 255) / 256), 256>>>(d_o, d_ref, d_mag,
                                                                    (long long)nout, d_bad);
        int hbad = 1;
        if (cudaMemcpy(&hbad, d_bad, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
            ok = false;
        if (cudaDeviceSynchronize() != cudaSuccess) ok = false;
        if (hbad != 0) ok = false;
    }
    cudaGetLastError();
    if (d_in) cudaFree(d_in);
    if (d_k) cudaFree(d_k);
    if (d_o) cudaFree(d_o);
    if (d_ref) cudaFree(d_ref);
    if (d_mag) cudaFree(d_mag);
    if (d_bad) cudaFree(d_bad);
    cudaGetLastError();
    return ok;
}

// Chain-2 variant first, then chain-1; each with both readings of the LBO/SBO fields.
void nw_selftest(int cls, int mwi) {
    static const NwTest t0[4] = {{200, 300, 8, 8, 192, 0},
                                 {149, 251, 3, 9, 64, 1},
                                 {90, 77, 9, 1, 64, 0},
                                 {160, 264, 8, 8, 128, 1}};
    static const NwTest t1[4] = {{200, 300, 16, 16, 128, 0},
                                 {149, 251, 7, 11, 64, 1},
                                 {120, 203, 17, 17, 160, 0},
                                 {150, 280, 16, 16, 96, 1}};
    static const NwTest t2[4] = {{181, 333, 32, 32, 96, 0},
                                 {150, 260, 5, 27, 64, 1},
                                 {100, 172, 33, 33, 112, 0},
                                 {140, 300, 32, 32, 128, 1}};
    const NwTest* ts = (cls == 0) ? t0 : ((cls == 1) ? t1 : t2);
    const int mw = (mwi == 0) ? 3 : 2;
    for (int ch = 1; ch >= 0; --ch) {
        for (int sw = 0; sw < 2; ++sw) {
            bool ok = true;
            for (int i = 0; i < 4 && ok; ++i) ok = nw_selftest_one(cls, mw, ch, sw, ts[i]);
            if (ok) {
                g_nw_status[cls][mwi] = 1;
                g_nw_ch2[cls][mwi] = ch;
                g_nw_swap[cls][mwi] = sw;
                return;
            }
        }
    }
    g_nw_status[cls][mwi] = -1;
}

int nw_ow_list(int cls, const int** ows) {
    static const int l0[4] = {64, 128, 192, 248};
    static const int l1[4] = {64, 96, 128, 192};
    static const int l2[5] = {48, 64, 96, 112, 128};
    if (cls == 0) {
        *ows = l0;
        return 4;
    }
    if (cls == 1) {
        *ows = l1;
        return 4;
    }
    *ows = l2;
    return 5;
}

// ---- per-shape candidate choice ----
struct Cand {
    int type;  // 0: round-3 path, 1: round-4 wgmma path, 2: round-5 wgmma path
    int ow;    // type 2: output tile width
    int mw;    // type 2: max warpgroups per CTA (3 or 2)
};
struct TuneEntry {
    int H, W, kh, kw;
    Cand c;
};
TuneEntry g_tune[32];
int g_ntune = 0;

bool tune_lookup(int H, int W, int kh, int kw, Cand* c) {
    for (int i = 0; i < g_ntune && i < 32; ++i)
        if (g_tune[i].H == H && g_tune[i].W == W && g_tune[i].kh == kh && g_tune[i].kw == kw) {
            *c = g_tune[i].c;
            return true;
        }
    return false;
}
void tune_store(int H, int W, int kh, int kw, const Cand& c) {
    const int slot = g_ntune % 32;
    g_tune[slot].H = H;
    g_tune[slot].W = W;
    g_tune[slot].kh = kh;
    g_tune[slot].kw = kw;
    g_tune[slot].c = c;
    ++g_ntune;
}

bool run_cand(const Cand& c, const float* in, const float* ker, float* out, int H, int W, int kh,
              int kw, int Ho, int Wo) {
    if (c.type == 0) {
        run_old(in, ker, out, H, W, kh, kw, Ho, Wo);
        return true;
    }
    if (c.type == 1) return launch_wg_kind(wg_kind(kw), in, ker, out, H, W, kh, kw, Ho, Wo, 0);
    if (c.type == 2) {
        const int cls = nw_class(kw);
        if (cls < 0) return false;
        const int mwi = (c.mw == 2) ? 1 : 0;
        if (g_nw_status[cls][mwi] != 1) return false;
        return launch_nw_any(cls, c.mw, g_nw_ch2[cls][mwi], in, ker, out, H, W, kh, kw, Ho, Wo,
                             c.ow, 0, false, g_nw_swap[cls][mwi]);
    }
    return false;
}

bool tune_eligible(int Ho, int Wo, int kw) {
    return nw_class(kw) >= 0 && (long long)Ho * (long long)Wo >= 250000LL;
}

constexpr int MAXCAND = 24;

// First call of a shape: the round-3 path writes the result; every other candidate runs into
// a scratch buffer, is checked against it, and is timed; the fastest valid one is kept.
void tune_and_run(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
                  int Ho, int Wo) {
    Cand cands[MAXCAND];
    int nc = 0;
    cands[nc++] = Cand{0, 0, 0};
    const int kind = wg_kind(kw);
    if (kind != 0 && wg_tiles(kind, Ho, Wo) >= 3LL * num_sms()) {
        if (g_wg_status[kind] == 0) g_wg_status[kind] = wg_selftest(kind) ? 1 : -1;
        if (g_wg_status[kind] == 1) cands[nc++] = Cand{1, 0, 0};
    }
    const int cls = nw_class(kw);
    if (cls >= 0) {
        const int nmw = (cls == 2) ? 2 : 1;
        for (int mwi = 0; mwi < nmw; ++mwi) {
            if (g_nw_status[cls][mwi] == 0) nw_selftest(cls, mwi);
            if (g_nw_status[cls][mwi] != 1) continue;
            const int mw = (mwi == 0) ? 3 : 2;
            const int* ows = nullptr;
            const int nows = nw_ow_list(cls, &ows);
            long long prev = -1;
            for (int i = 0; i < nows && nc < MAXCAND; ++i) {
                const int ow = ows[i];
                if (nw_nwg_fit(nw_nb(cls), mw, kh, kw, ow) <= 0) continue;
                const long long tx = ((long long)Wo + ow - 1) / ow;
                if (tx == prev) continue;  // same tile count as a narrower tile: skip
                prev = tx;
                cands[nc++] = Cand{2, ow, mw};
            }
        }
    }
    cudaGetLastError();

    run_old(in, ker, out, H, W, kh, kw, Ho, Wo);  // this call's result
    Cand best = cands[0];

    if (nc > 1) {
        const size_t nout = (size_t)Ho * (size_t)Wo;
        float* scratch = nullptr;
        unsigned int* aux = nullptr;
        cudaEvent_t e0 = nullptr, e1 = nullptr;
        bool ready = true;
        if (cudaMalloc(&scratch, nout * sizeof(float)) != cudaSuccess) {
            scratch = nullptr;
            ready = false;
        }
        if (ready && cudaMalloc(&aux, 64) != cudaSuccess) {
            aux = nullptr;
            ready = false;
        }
        if (ready && cudaEventCreate(&e0) != cudaSuccess) {
            e0 = nullptr;
            ready = false;
        }
        if (ready && cudaEventCreate(&e1) != cudaSuccess) {
            e1 = nullptr;
            ready = false;
        }
        cudaGetLastError();
        if (ready) {
            unsigned int* d_mx = aux;
            int* d_bad = reinterpret_cast<int*>(aux + 4);
            const unsigned nb = blocks_for(nout);
            cudaMemset(aux, 0, 64);
            absmax_kernel<<<nb, 256>>>(out, (long long)nout, d_mx);

            bool valid[MAXCAND];
            float tbest[MAXCAND];
            for (int c = 0; c < nc; ++c) {
                valid[c] = (c == 0);
                tbest[c] = 3.0e38f;
            }
            for (int c = 1; c < nc; ++c) {
                cudaMemset(d_bad, 0, sizeof(int));
                if (!run_cand(cands[c], in, ker, scratch, H, W, kh, kw, Ho, Wo)) {
                    cudaGetLastError();
                    continue;
                }
                mismatch_scaled_kernel<<<nb, 256>>>(scratch, out, (long long)nout, d_mx, d_bad);
                int hbad = 1;
                if (cudaMemcpy(&hbad, d_bad, sizeof(int), cudaMemcpyDeviceToHost) ==
                        cudaSuccess &&
                    hbad == 0)
                    valid[c] = true;
                cudaGetLastError();
            }
            for (int rep = 0; rep < 2; ++rep) {
                for (int c = 0; c < nc; ++c) {
                    if (!valid[c]) continue;
                    cudaEventRecord(e0);
                    const bool ok = run_cand(cands[c], in, ker, scratch, H, W, kh, kw, Ho, Wo);
                    cudaEventRecord(e1);
                    cudaEventSynchronize(e1);
                    float ms = 0.0f;
                    if (ok && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess) {
                        if (ms < tbest[c]) tbest[c] = ms;
                    } else if (c != 0) {
                        valid[c] = false;
                    }
                    cudaGetLastError();
                }
            }
            float bt = 0.97f * tbest[0];
            for (int c = 1; c < nc; ++c) {
                if (valid[c] && tbest[c] < bt) {
                    bt = tbest[c];
                    best = cands[c];
                }
            }
        }
        if (e0) cudaEventDestroy(e0);
        if (e1) cudaEventDestroy(e1);
        if (scratch) cudaFree(scratch);
        if (aux) cudaFree(aux);
        cudaGetLastError();
    }
    tune_store(H, W, kh, kw, best);
}

}  // namespace

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh > 0 && kw > 0 && H > 0 && W > 0 && Ho > 0 && Wo > 0) {
        Cand c;
        if (tune_lookup(H, W, kh, kw, &c)) {
            bool done = false;
            if (c.type != 0) done = run_cand(c, input, kernel, output, H, W, kh, kw, Ho, Wo);
            if (!done) {
                cudaGetLastError();
                run_old(input, kernel, output, H, W, kh, kw, Ho, Wo);
            }
        } else if (tune_eligible(Ho, Wo, kw)) {
            tune_and_run(input, kernel, output, H, W, kh, kw, Ho, Wo);
        } else {
            run_old(input, kernel, output, H, W, kh, kw, Ho, Wo);
        }
    }
    cudaDeviceSynchronize();
}
