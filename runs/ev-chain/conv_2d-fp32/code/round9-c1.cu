// conv_2d (fp32): valid 2-D cross-correlation (no kernel flip)
//   out[r][c] = sum_{m<kh} sum_{n<kw} in[r+m][c+n] * ker[m][n]
//
// Paths
//  (A) NEW, large problems with 10 <= kw <= 33: Hopper wgmma.mma_async (A from registers, RS),
//      persistent CTAs of up to 3 independent warpgroups that share one smem copy of the
//      Toeplitz weight bands (built once per CTA).
//  (B) round-3 path: scaled-FP16 two-term split implicit GEMM on mma.sync (kw <= 41),
//      then a SIMT fp32 kernel, then a naive kernel.
//
// Numerics of both tensor paths (identical scheme):
//   per tile s_a = 2^ea maps max|x| into [2^14, 2^15), s_w = 2^ew does the same for max|w|;
//   x*s_a = xh + xl, w*s_w = wh + wl (fp16 each); per (kernel row, k16 chunk) the partial
//   lo(x)*hi(w) + hi(x)*lo(w) + hi(x)*hi(w) is formed by a 3-MMA chain started from 0 and is
//   added into fp32 sums with a plain FADD; out = (sum * 2^-ea) * 2^-ew.
//
// wgmma formulation (per kernel row m, per 16-column input chunk q of the tile):
//   D[r][n'] = sum_k A[r][k] * B'[k][n'],  A[r][k] = x[r+m][16q+k],
//   B'[k][n'] = w[m][k + n' - 15],  output column c = 16q + 15 - n'   (reversed columns).
//   B' is Toeplitz: core matrix (n-block b, k-block kb) depends only on b+kb, so the whole band
//   for (m, hi/lo) is NS = N/8+1 consecutive 8x8 fp16 core matrices and the no-swizzle K-major
//   descriptor uses LBO = SBO = 128 B.  Edge chunks use smaller N (start address shifted).
//
// Safety: the wgmma path is self-tested once per configuration against the round-3 path and
// autotuned (timed against it) once per shape; it is only used if correct and faster.
//
// (C) NEW, FFT overlap-save path (plain fp32 arithmetic) for 200 <= kh*kw, kh, kw <= 48:
//      two 128x128 input tiles are packed as one complex tile, 2-D FFT, product with the
//      (fp64-built) weight spectrum, inverse 2-D FFT.  Gated per kernel-size class by a
//      self-test against an fp64 reference (error / tolerance <= 0.35) and autotuned per shape
//      against the other paths.
//
// Round 9 (FFT path): the weight spectrum is built inside conv2d_fft (each CTA computes its
// share of the 65 spectrum columns after its first row phase and publishes it through a
// release/acquire counter in global memory; no prologue kernel, no PDL); the 128-point FFT
// twiddles are read from a lane-major smem table at each use instead of being held in 30
// registers; interior tiles load their input rows without per-element predicates; the tuner
// takes the best of 3 timings and picks the fastest candidate before the 3% margin check.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <cstring>

// FFT path spectrum hand-off: [0] spectrum columns published, [1] CTAs past the wait.
// Both return to 0 at the end of every conv2d_fft launch (reset by the last CTA to pass).
__device__ unsigned int conv2d_fft_sync_g[2];

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
// Hopper wgmma path
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

// D(64xNN) (+)= A(64x16, registers) * B(16xNN, smem descriptor); acc == 0 -> D = A*B
template <int NR>
__device__ __forceinline__ void wg_mma(IntTag<16>, float (&d)[NR], const uint32_t (&a)[4],
                                       uint64_t desc, int acc) {
    static_assert(NR >= 8, "accumulator too small");
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, "
        "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
template <int NR>
__device__ __forceinline__ void wg_mma(IntTag<32>, float (&d)[NR], const uint32_t (&a)[4],
                                       uint64_t desc, int acc) {
    static_assert(NR >= 16, "accumulator too small");
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
template <int NR>
__device__ __forceinline__ void wg_mma(IntTag<48>, float (&d)[NR], const uint32_t (&a)[4],
                                       uint64_t desc, int acc) {
    static_assert(NR >= 24, "accumulator too small");
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %29, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, "
        "{%24, %25, %26, %27}, %28, p, 1, 1, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
          "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}

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
// FFT overlap-save path (plain fp32 arithmetic)
//
//   Two 128x128 input tiles (A, B) are packed as one complex tile z = xA' + i*xB'.  w is real,
//   so IFFT2(FFT2(z) * conj(FFT2(w))) = yA + i*yB (circular cross-correlation, valid for
//   r <= 128-kh, c <= 128-kw): no Hermitian unpacking is needed.
//   x' = x - mu_row (per tile-row mean, removed for accuracy); the exact correction
//   sum_m mu[r+m] * S_m (S_m = sum_n w[m][n]) is added back in fp64.
//   Each 128-point FFT is done by 8 lanes holding 16 points each: radix-16 in registers,
//   twiddle, one xor-swizzled smem exchange, radix-8 in registers.  Input and output both use
//   the natural "index = lane + 8*j" distribution: no bit reversal anywhere.
//   Working buffer: 128 x 129 complex (row stride == 1 mod 16 float2: conflict-free for rows,
//   columns and the exchanges).  The weight half spectrum (128 x 65, fp64-built, conjugated and
//   scaled by 1/128^2) is built inside the kernel (each CTA its share of the columns, after its
//   first row phase), exchanged through global scratch with a release/acquire counter, and
//   then lives in smem.
//   Persistent CTAs of 512 threads; per pair of tiles: row phase (loads of this pair issued
//   first, inverse rows + stores of the previous pair, forward rows of this pair), column phase
//   (forward column FFT, spectrum product, inverse column FFT, fused in registers).
// ==========================================================================================
constexpr int FFT_RS = 129;   // complex row stride of the working buffer (== 1 mod 16)
constexpr int FFT_FW = 65;    // columns of the weight half spectrum
constexpr int FFT_NT = 512;   // threads per CTA: 64 groups of 8 lanes
constexpr int FFT_KMAX = 48;  // largest kernel extent handled by this path
constexpr size_t FFT_BUF_BYTES = (size_t)128 * FFT_RS * 8;  // 132096
constexpr size_t FFT_F_BYTES = (size_t)128 * FFT_FW * 8;    // 66560
constexpr size_t FFT_TW_BYTES = (size_t)128 * 8;
constexpr size_t FFT_S_BYTES = (size_t)64 * 8;
constexpr size_t FFT_MU_BYTES = (size_t)512 * 4;  // row means: 2 buffers x 2 tiles x 128 rows
constexpr size_t FFT_SMEM =
    FFT_BUF_BYTES + FFT_F_BYTES + FFT_TW_BYTES + FFT_S_BYTES + FFT_MU_BYTES;  // 202240
// spectrum-build scratch inside the Fs area (used before Fs is filled)
constexpr size_t FFT_KER_BYTES = (size_t)FFT_KMAX * FFT_KMAX * 4;  // 9216
constexpr size_t FFT_TWD_BYTES = (size_t)128 * 16;
static_assert(FFT_KER_BYTES + FFT_TWD_BYTES + (size_t)FFT_FW * FFT_KMAX * 16 <= FFT_F_BYTES,
              "spectrum scratch must fit in the Fs area");
static_assert((FFT_BUF_BYTES % 16) == 0 && (FFT_KER_BYTES % 16) == 0, "scratch alignment");

constexpr float FX_C1 = 0.92387953251128675613f;  // cos(pi/8)
constexpr float FX_S1 = 0.38268343236508977173f;  // sin(pi/8)
constexpr float FX_R = 0.70710678118654752440f;   // sqrt(1/2)

// volatile: re-read at every use (never hoisted into long-lived registers)
__device__ __forceinline__ float2 lds_f2(uint32_t addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
    return v;
}
__device__ __forceinline__ unsigned int ld_acquire_u32(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ float2 fx_add(float2 a, float2 b) {
    return make_float2(a.x + b.x, a.y + b.y);
}
__device__ __forceinline__ float2 fx_sub(float2 a, float2 b) {
    return make_float2(a.x - b.x, a.y - b.y);
}
// a * b
__device__ __forceinline__ float2 fx_mul(float2 a, float2 b) {
    return make_float2(fmaf(a.x, b.x, -a.y * b.y), fmaf(a.x, b.y, a.y * b.x));
}
// a * conj(b)
__device__ __forceinline__ float2 fx_mulc(float2 a, float2 b) {
    return make_float2(fmaf(a.x, b.x, a.y * b.y), fmaf(a.y, b.x, -a.x * b.y));
}
// a * (c + i s)
__device__ __forceinline__ float2 fx_mulk(float2 a, float c, float s) {
    return make_float2(fmaf(a.x, c, -a.y * s), fmaf(a.x, s, a.y * c));
}
// a * (S i)
template <int S>
__device__ __forceinline__ float2 fx_mul_si(float2 a) {
    return (S < 0) ? make_float2(a.y, -a.x) : make_float2(-a.y, a.x);
}
// a * (R + i S R)     (w8^1 == w16^2)
template <int S>
__device__ __forceinline__ float2 fx_mul_w81(float2 a) {
    return (S < 0) ? make_float2(FX_R * (a.x + a.y), FX_R * (a.y - a.x))
                   : make_float2(FX_R * (a.x - a.y), FX_R * (a.x + a.y));
}
// a * (-R + i S R)    (w8^3 == w16^6)
template <int S>
__device__ __forceinline__ float2 fx_mul_w83(float2 a) {
    return (S < 0) ? make_float2(FX_R * (a.y - a.x), -FX_R * (a.x + a.y))
                   : make_float2(-FX_R * (a.x + a.y), FX_R * (a.x - a.y));
}

// 4-point DFT, sign S (w4 = S*i), natural order in place
template <int S>
__device__ __forceinline__ void fx_dft4(float2& x0, float2& x1, float2& x2, float2& x3) {
    const float2 a = fx_add(x0, x2);
    const float2 b = fx_sub(x0, x2);
    const float2 c = fx_add(x1, x3);
    const float2 d = fx_mul_si<S>(fx_sub(x1, x3));
    x0 = fx_add(a, c);
    x1 = fx_add(b, d);
    x2 = fx_sub(a, c);
    x3 = fx_sub(b, d);
}

// 16-point DFT (w16 = e^{S i pi/8}), natural order in and out.  a = 4 a1 + a0, c = c0 + 4 c1.
template <int S>
__device__ __forceinline__ void fx_dft16(const float2 (&in)[16], float2 (&out)[16]) {
    float2 t[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) t[i] = in[i];
    // DFT4 over a1 for every a0: position a0 + 4 c0 holds T[a0][c0]
#pragma unroll
    for (int a0 = 0; a0 < 4; ++a0) fx_dft4<S>(t[a0], t[a0 + 4], t[a0 + 8], t[a0 + 12]);
    // T[a0][c0] *= w16^(a0 c0)
    t[5] = fx_mulk(t[5], FX_C1, (float)S * FX_S1);      // m = 1
    t[9] = fx_mul_w81<S>(t[9]);                         // m = 2
    t[13] = fx_mulk(t[13], FX_S1, (float)S * FX_C1);    // m = 3
    t[6] = fx_mul_w81<S>(t[6]);                         // m = 2
    t[10] = fx_mul_si<S>(t[10]);                        // m = 4
    t[14] = fx_mul_w83<S>(t[14]);                       // m = 6
    t[7] = fx_mulk(t[7], FX_S1, (float)S * FX_C1);      // m = 3
    t[11] = fx_mul_w83<S>(t[11]);                       // m = 6
    t[15] = fx_mulk(t[15], -FX_C1, -(float)S * FX_S1);  // m = 9
    // DFT4 over a0 for every c0: position 4 c0 + c1 holds V[c0 + 4 c1]
#pragma unroll
    for (int c0 = 0; c0 < 4; ++c0)
        fx_dft4<S>(t[4 * c0], t[4 * c0 + 1], t[4 * c0 + 2], t[4 * c0 + 3]);
#pragma unroll
    for (int c0 = 0; c0 < 4; ++c0)
#pragma unroll
        for (int c1 = 0; c1 < 4; ++c1) out[c0 + 4 * c1] = t[4 * c0 + c1];
}

// 8-point DFT (w8 = e^{S i pi/4}), natural order in and out.  b = b0 + 2 b1, d = d0 + 4 d1.
template <int S>
__device__ __forceinline__ void fx_dft8(const float2 (&u)[8], float2 (&X)[8]) {
    float2 p[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) p[i] = u[i];
    fx_dft4<S>(p[0], p[2], p[4], p[6]);
    fx_dft4<S>(p[1], p[3], p[5], p[7]);
    p[3] = fx_mul_w81<S>(p[3]);
    p[5] = fx_mul_si<S>(p[5]);
    p[7] = fx_mul_w83<S>(p[7]);
#pragma unroll
    for (int d0 = 0; d0 < 4; ++d0) {
        X[d0] = fx_add(p[2 * d0], p[2 * d0 + 1]);
        X[d0 + 4] = fx_sub(p[2 * d0], p[2 * d0 + 1]);
    }
}

// 128-point FFT (sign S, unnormalised) by the 8 lanes l = 0..7 of a group.
// In: v[j] = x[l + 8 j].  Out: v[j] = X[l + 8 j].
// n = 8 a + b (b = lane), k = c + 16 d:  X[c+16d] = sum_b w8^{bd} w128^{bc} sum_a x[8a+b] w16^{ac}.
// The 128 complex slots base[p * STR], p < 128, are used for the exchange (they are free while
// the data is in registers); slot(b, c) = 8 c + (b ^ (c & 7)).
// twa: shared address of the lane-major twiddle table entry (c = 0, l); entry c is 64c bytes on.
template <int S, int STR>
__device__ __forceinline__ void fx_fft128(float2 (&v)[16], float2* base, int l, uint32_t twa) {
    float2 V[16];
    fx_dft16<S>(v, V);
#pragma unroll
    for (int c = 1; c < 16; ++c) {
        const float2 t = lds_f2(twa + 64u * (uint32_t)c);  // w128^{l c}
        V[c] = (S < 0) ? fx_mul(V[c], t) : fx_mulc(V[c], t);
    }
    __syncwarp();  // every lane has finished reading its inputs from these slots
#pragma unroll
    for (int c = 0; c < 16; ++c) base[(8 * c + (l ^ (c & 7))) * STR] = V[c];
    __syncwarp();
    float2 U0[8], U1[8];
#pragma unroll
    for (int b = 0; b < 8; ++b) {
        const int s0 = 8 * l + (b ^ l);  // slot(b, c = l) ; c = l + 8 is 64 slots further
        U0[b] = base[s0 * STR];
        U1[b] = base[(s0 + 64) * STR];
    }
    __syncwarp();  // exchange reads done before the caller overwrites the slots
    float2 X0[8], X1[8];
    fx_dft8<S>(U0, X0);
    fx_dft8<S>(U1, X1);
#pragma unroll
    for (int d = 0; d < 8; ++d) {
        v[2 * d] = X0[d];      // k = l + 16 d
        v[2 * d + 1] = X1[d];  // k = l + 8 + 16 d
    }
}

__device__ __forceinline__ void fx_tile_origin(int t, int tilesX, int OUTR, int OUTC, int& r0,
                                               int& c0) {
    const int ty = t / tilesX;
    const int tx = t - ty * tilesX;
    r0 = ty * OUTR;
    c0 = tx * OUTC;
}

// x[j] = in[r0 + R][c0 + l + 8 j] (0 outside the image); nv = valid columns of the row (0 if none)
__device__ __forceinline__ void fx_load_row(const float* __restrict__ in, int H, int W, int r0,
                                            int c0, int R, int l, bool valid, float (&x)[16],
                                            int& nv) {
    const int gr = r0 + R;
    if (valid && gr < H) {
        nv = min(128, W - c0);
        const float* p = in + (size_t)gr * (size_t)W + (size_t)(c0 + l);
        if (nv >= 128) {  // interior: the whole 128-column row is in range
#pragma unroll
            for (int j = 0; j < 16; ++j) x[j] = __ldg(p + 8 * j);
        } else {
            const int lim = nv - l;
#pragma unroll
            for (int j = 0; j < 16; ++j) x[j] = (8 * j < lim) ? __ldg(p + 8 * j) : 0.0f;
        }
    } else {
        nv = 0;
#pragma unroll
        for (int j = 0; j < 16; ++j) x[j] = 0.0f;
    }
}

// Fused weight spectrum (replaces the old prologue kernel).
//   Fg[k1][k2] = conj(W(k1,k2)) / 128^2 for k2 <= 64 (fp64 separable DFT of the zero-padded
//   weights); CTA bid computes columns k2 = bid, bid + G, ... (< 65).  Sd[m] = sum_n w[m][n]
//   (fp64) is computed by every CTA for itself.  Then: publish (fence + counter add), wait until
//   all 65 columns are published (acquire), count this CTA as past the wait; the last CTA to
//   pass resets both counters for the next launch.  The grid is at most one CTA per SM and
//   every CTA fits on an SM alone, so all CTAs are co-resident: the wait cannot deadlock.
//   kerS: the kh*kw weights (cp.async'd at kernel start, waited for here); twd, Ash: scratch.
//   Must be called by all threads of the CTA, exactly once per CTA.
__device__ __noinline__ void fft_spectrum_and_sync(const float* kerS, double2* twd, double2* Ash,
                                                   double* Sd, float2* Fg, int kh, int kw,
                                                   int bid, int G, int tid) {
    cp_async_wait_all();
    if (tid < 128) {
        double sn, cs;
        sincospi((double)tid * (1.0 / 64.0), &sn, &cs);
        twd[tid] = make_double2(cs, sn);  // e^{+2 pi i t / 128}
    }
    __syncthreads();  // every thread's weight copies have landed; twd complete
    if (tid < kh) {
        double s = 0.0;
        for (int n = 0; n < kw; ++n) s += (double)kerS[tid * kw + n];
        Sd[tid] = s;
    }
    const int ncols = (bid < FFT_FW) ? (FFT_FW - 1 - bid) / G + 1 : 0;
    // step 1: A[j][m] = sum_n w[m][n] e^{+2 pi i k2 n / 128}
    for (int idx = tid; idx < ncols * kh; idx += FFT_NT) {
        const int j = idx / kh;
        const int m = idx - j * kh;
        const int k2 = bid + j * G;
        const float* wr = kerS + m * kw;
        double ar = 0.0, ai = 0.0;
        for (int n = 0; n < kw; ++n) {
            const double wv = (double)wr[n];
            const double2 e = twd[(k2 * n) & 127];
            ar = fma(wv, e.x, ar);
            ai = fma(wv, e.y, ai);
        }
        Ash[idx] = make_double2(ar, ai);  // idx == j * kh + m
    }
    __syncthreads();
    // step 2: F[k1][k2] = sum_m A[j][m] e^{+2 pi i k1 m / 128}; 4 lanes per (k1, column)
    // (the trip count is ncols for every thread, so the shuffles see full warps)
    for (int idx = tid; idx < ncols * FFT_NT; idx += FFT_NT) {
        const int j = idx / FFT_NT;
        const int k1 = (idx >> 2) & 127;
        const int part = idx & 3;
        const double2* a = Ash + j * kh;
        double fr = 0.0, fi = 0.0;
        for (int m = part; m < kh; m += 4) {
            const double2 av = a[m];
            const double2 e = twd[(k1 * m) & 127];
            fr = fma(av.x, e.x, fma(-av.y, e.y, fr));
            fi = fma(av.x, e.y, fma(av.y, e.x, fi));
        }
        fr += __shfl_xor_sync(0xffffffffu, fr, 1);
        fi += __shfl_xor_sync(0xffffffffu, fi, 1);
        fr += __shfl_xor_sync(0xffffffffu, fr, 2);
        fi += __shfl_xor_sync(0xffffffffu, fi, 2);
        if (part == 0) {
            const int k2 = bid + j * G;
            Fg[k1 * FFT_FW + k2] = make_float2((float)(fr * (1.0 / 16384.0)),
                                               (float)(fi * (1.0 / 16384.0)));
        }
    }
    __threadfence();  // this thread's spectrum writes before the release below
    __syncthreads();
    if (tid == 0) {
        if (ncols > 0) atomicAdd(&conv2d_fft_sync_g[0], (unsigned int)ncols);
        while (ld_acquire_u32(&conv2d_fft_sync_g[0]) < (unsigned int)FFT_FW) __nanosleep(64);
        const unsigned int prev = atomicAdd(&conv2d_fft_sync_g[1], 1u);
        if (prev == (unsigned int)G - 1u) {  // every CTA is past the wait: reset for next launch
            atomicExch(&conv2d_fft_sync_g[1], 0u);
            atomicExch(&conv2d_fft_sync_g[0], 0u);
        }
    }
    __syncthreads();  // the whole spectrum is visible; scratch (kerS, twd, Ash) is free again
}

// Main FFT kernel.  Tile t: origin (ty*OUTR, tx*OUTC), OUTR = 129-kh, OUTC = 129-kw outputs.
// Pair p = tiles (2p, 2p+1).  CTA b handles pairs b, b+G, b+2G, ...
__global__ void __launch_bounds__(FFT_NT, 1)
conv2d_fft(const float* __restrict__ in, const float* __restrict__ ker, float* __restrict__ out,
           float2* Fg, int H, int W, int kh, int kw, int Ho, int Wo, int OUTR, int OUTC,
           int tilesX, int T, int npairs) {
    extern __shared__ __align__(16) unsigned char smem_fft[];
    float2* buf = reinterpret_cast<float2*>(smem_fft);
    float2* Fs = reinterpret_cast<float2*>(smem_fft + FFT_BUF_BYTES);
    float2* twS = reinterpret_cast<float2*>(smem_fft + FFT_BUF_BYTES + FFT_F_BYTES);
    double* Sd =
        reinterpret_cast<double*>(smem_fft + FFT_BUF_BYTES + FFT_F_BYTES + FFT_TW_BYTES);
    float* muS = reinterpret_cast<float*>(smem_fft + FFT_BUF_BYTES + FFT_F_BYTES +
                                          FFT_TW_BYTES + FFT_S_BYTES);

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int l = lane & 7;
    // row (row phase) / column (column phase) of this lane's group in round 0; the two groups
    // of a half-warp are 8 apart (bank-conflict-free with the 129 stride)
    const int base64 = (warp & 7) + 8 * (lane >> 3) + 32 * (warp >> 3);

    // spectrum-build scratch (inside the Fs area, which is only filled after the build)
    float* kerS = reinterpret_cast<float*>(smem_fft + FFT_BUF_BYTES);
    double2* twd = reinterpret_cast<double2*>(smem_fft + FFT_BUF_BYTES + FFT_KER_BYTES);
    double2* Ash =
        reinterpret_cast<double2*>(smem_fft + FFT_BUF_BYTES + FFT_KER_BYTES + FFT_TWD_BYTES);
    {
        const int nk = kh * kw;
        for (int i = tid; i < nk; i += FFT_NT) cp_async_f32(kerS + i, ker + i, 4);
        cp_async_commit();  // waited for in fft_spectrum_and_sync
    }

    // lane-major twiddle table: twS[8 c + l] = w128^{l c} = e^{-2 pi i l c / 128}, c < 16
    if (tid < 128) {
        const int c = tid >> 3;
        const int ll = tid & 7;
        double sn, cs;
        sincospi((double)(ll * c) * (1.0 / 64.0), &sn, &cs);
        twS[tid] = make_float2((float)cs, (float)(-sn));
    }
    __syncthreads();
    const uint32_t twa = smem_u32(twS) + 8u * (uint32_t)l;

    const int G = (int)gridDim.x;
    const int bid = (int)blockIdx.x;
    const int npc = (npairs - bid + G - 1) / G;
    if (npc <= 0) {  // (not reached: the grid never exceeds the pair count)
        fft_spectrum_and_sync(kerS, twd, Ash, Sd, Fg, kh, kw, bid, G, tid);
        return;
    }

    int cur = -1;
    int cA_r0 = 0, cA_c0 = 0, cB_r0 = 0, cB_c0 = 0;
    bool cBv = false;

#pragma unroll 1
    for (int it = 0; it <= npc; ++it) {
        const bool has_next = it < npc;
        const int nxt = has_next ? bid + it * G : -1;
        int nA_r0 = 0, nA_c0 = 0, nB_r0 = 0, nB_c0 = 0;
        bool nBv = false;
        if (has_next) {
            fx_tile_origin(2 * nxt, tilesX, OUTR, OUTC, nA_r0, nA_c0);
            nBv = (2 * nxt + 1) < T;
            if (nBv) fx_tile_origin(2 * nxt + 1, tilesX, OUTR, OUTC, nB_r0, nB_c0);
        }
        // L2 prefetch of the input of the pair after this one
        if (it + 1 < npc) {
            const int pp = bid + (it + 1) * G;
            const int trow = tid >> 1;  // 0..255
            const int t = 2 * pp + (trow >> 7);
            const int rr = trow & 127;
            if (t < T) {
                int pr0, pc0;
                fx_tile_origin(t, tilesX, OUTR, OUTC, pr0, pc0);
                const int gr = pr0 + rr;
                if (gr < H) {
                    const float* rowg = in + (size_t)gr * (size_t)W;
                    const int cs = pc0 + 64 * (tid & 1);
                    const int ce = min(cs + 63, W - 1);
                    if (cs <= ce) {
                        prefetch_l2(rowg + cs);
                        if (cs + 32 <= ce) prefetch_l2(rowg + cs + 32);
                        prefetch_l2(rowg + ce);
                    }
                }
            }
        }

        // ---------------- row phase ----------------
#pragma unroll 1
        for (int rnd = 0; rnd < 2; ++rnd) {
            const int R = base64 + 64 * rnd;
            float2* rowp = buf + R * FFT_RS;
            float xa[16], xb[16];
            int nvA = 0, nvB = 0;
            if (has_next) {  // loads first: their latency hides behind the inverse FFT
                fx_load_row(in, H, W, nA_r0, nA_c0, R, l, true, xa, nvA);
                fx_load_row(in, H, W, nB_r0, nB_c0, R, l, nBv, xb, nvB);
            }
            if (cur >= 0) {
                const bool act = R < OUTR;
                if (__any_sync(0xffffffffu, act)) {
                    // row-mean correction for output row R of both tiles (fp64)
                    const float* muc = muS + ((it - 1) & 1) * 256 + (act ? R : 0);
                    double pa = 0.0, pb = 0.0;
                    for (int m = l; m < kh; m += 8) {
                        const double s = Sd[m];
                        pa = fma((double)muc[m], s, pa);
                        pb = fma((double)muc[128 + m], s, pb);
                    }
#pragma unroll
                    for (int o = 1; o < 8; o <<= 1) {
                        pa += __shfl_xor_sync(0xffffffffu, pa, o);
                        pb += __shfl_xor_sync(0xffffffffu, pb, o);
                    }
                    float2 v[16];
#pragma unroll
                    for (int j = 0; j < 16; ++j) v[j] = rowp[l + 8 * j];
                    fx_fft128<1, 1>(v, rowp, l, twa);
                    if (act) {
                        const int orA = cA_r0 + R;
                        if (orA < Ho) {
                            const float cr = (float)pa;
                            float* o = out + (size_t)orA * (size_t)Wo + (size_t)(cA_c0 + l);
                            const int lim = min(OUTC, Wo - cA_c0) - l;
#pragma unroll
                            for (int j = 0; j < 16; ++j)
                                if (8 * j < lim) o[8 * j] = v[j].x + cr;
                        }
                        if (cBv) {
                            const int orB = cB_r0 + R;
                            if (orB < Ho) {
                                const float cr = (float)pb;
                                float* o = out + (size_t)orB * (size_t)Wo + (size_t)(cB_c0 + l);
                                const int lim = min(OUTC, Wo - cB_c0) - l;
#pragma unroll
                                for (int j = 0; j < 16; ++j)
                                    if (8 * j < lim) o[8 * j] = v[j].y + cr;
                            }
                        }
                    }
                }
            }
            if (has_next) {
                float sA = 0.0f, sB = 0.0f;
#pragma unroll
                for (int j = 0; j < 16; ++j) {
                    sA += xa[j];
                    sB += xb[j];
                }
#pragma unroll
                for (int o = 1; o < 8; o <<= 1) {
                    sA += __shfl_xor_sync(0xffffffffu, sA, o);
                    sB += __shfl_xor_sync(0xffffffffu, sB, o);
                }
                const float muA = (nvA > 0) ? sA / (float)nvA : 0.0f;
                const float muB = (nvB > 0) ? sB / (float)nvB : 0.0f;
                float2 v[16];
#pragma unroll
                for (int j = 0; j < 16; ++j) v[j] = make_float2(xa[j] - muA, xb[j] - muB);
                fx_fft128<-1, 1>(v, rowp, l, twa);
#pragma unroll
                for (int j = 0; j < 16; ++j) rowp[l + 8 * j] = v[j];
                if (l == 0) {
                    muS[(it & 1) * 256 + R] = muA;
                    muS[(it & 1) * 256 + 128 + R] = muB;
                }
            }
        }
        if (!has_next) break;

        if (it == 0) {
            // this CTA's share of the weight spectrum (and its own row sums Sd), then wait for
            // all columns and copy the whole spectrum into smem (.cg: straight from L2)
            fft_spectrum_and_sync(kerS, twd, Ash, Sd, Fg, kh, kw, bid, G, tid);
            const unsigned char* gsrc = reinterpret_cast<const unsigned char*>(Fg);
            unsigned char* sdst = reinterpret_cast<unsigned char*>(Fs);
            for (int i = tid; i < (int)(FFT_F_BYTES / 16); i += FFT_NT)
                cp_async_16(sdst + 16 * i, gsrc + 16 * i, 16);
            cp_async_commit();
            cp_async_wait_all();
        }
        __syncthreads();

        // ---------------- column phase ----------------
#pragma unroll 1
        for (int rnd = 0; rnd < 2; ++rnd) {
            const int k2 = base64 + 64 * rnd;
            float2* colp = buf + k2;
            float2 v[16];
#pragma unroll
            for (int j = 0; j < 16; ++j) v[j] = colp[(l + 8 * j) * FFT_RS];
            fx_fft128<-1, FFT_RS>(v, colp, l, twa);
            // v[j] = Z(k1 = l + 8j, k2) ; multiply by F(k1,k2) = conj(W(k1,k2)) / 128^2
            const bool mir = k2 > 64;
            const int fcol = mir ? 128 - k2 : k2;
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                const int k1 = l + 8 * j;
                const int frow = mir ? ((128 - k1) & 127) : k1;
                float2 f = Fs[frow * FFT_FW + fcol];
                if (mir) f.y = -f.y;
                v[j] = fx_mul(v[j], f);
            }
            fx_fft128<1, FFT_RS>(v, colp, l, twa);
#pragma unroll
            for (int j = 0; j < 16; ++j) colp[(l + 8 * j) * FFT_RS] = v[j];
        }
        __syncthreads();

        cur = nxt;
        cA_r0 = nA_r0;
        cA_c0 = nA_c0;
        cB_r0 = nB_r0;
        cB_c0 = nB_c0;
        cBv = nBv;
    }
}


// Self-test helpers
__global__ void fill_hash_kernel(float* p, int n, uint32_t seed) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
        p[i] = ((float)(x >> 8) * (1.0f / 16777216.0f)) * 2.0f - 1.0f;
    }
}
__global__ void mismatch_kernel(const float* a, const float* ref, int n, int* bad) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float d = fabsf(a[i] - ref[i]);
        if (!(d <= 1e-3f * (1.0f + fabsf(ref[i])))) atomicAdd(bad, 1);
    }
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

// ---- wgmma path host side ----
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

// One self-test problem: wgmma path vs the round-3 path.
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
    fill_hash_kernel<<<(unsigned)((nin + 255) / 256), 256>>>(d_in, (int)nin, 0x12345679u);
    fill_hash_kernel<<<(unsigned)((nk + 255) / 256), 256>>>(d_k, (int)nk, 0x9e3779b9u);
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

// ---- FFT path host side ----
float2* g_fft_F = nullptr;
double* g_fft_S = nullptr;
int g_fft_scratch = 0;         // 0 not yet, 1 ok, -1 failed
int g_fft_status[2] = {0, 0};  // per accuracy class: 0 untested, 1 ok, -1 disabled
constexpr float FFT_GATE = 0.35f;  // max self-test error / tolerance accepted

bool fft_scratch_ok() {
    if (g_fft_scratch == 0) {
        void* p = nullptr;
        if (cudaMalloc(&p, FFT_F_BYTES + 64 * sizeof(double)) == cudaSuccess) {
            g_fft_F = reinterpret_cast<float2*>(p);
            g_fft_S = reinterpret_cast<double*>(reinterpret_cast<unsigned char*>(p) + FFT_F_BYTES);
            g_fft_scratch = 1;
        } else {
            cudaGetLastError();
            g_fft_scratch = -1;
        }
    }
    return g_fft_scratch == 1;
}

// -1: not eligible; 0: mid-size kernels (200 <= kh*kw < 576); 1: large kernels
int fft_class(int kh, int kw) {
    if (kh < 1 || kw < 1 || kh > FFT_KMAX || kw > FFT_KMAX) return -1;
    const int area = kh * kw;
    if (area >= 576) return 1;
    if (area >= 200) return 0;
    return -1;
}

bool launch_fft(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
                int Ho, int Wo, int grid_override) {
    if (kh < 1 || kw < 1 || kh > FFT_KMAX || kw > FFT_KMAX || Ho < 1 || Wo < 1) return false;
    if (!fft_scratch_ok()) return false;
    if (FFT_SMEM > (size_t)smem_optin_limit()) return false;
    static bool configured = false;
    if (!configured) {
        if (cudaFuncSetAttribute(conv2d_fft, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)FFT_SMEM) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        cudaFuncSetAttribute(conv2d_fft, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        cudaGetLastError();
        configured = true;
    }
    const int OUTR = 129 - kh;
    const int OUTC = 129 - kw;
    const long long tilesX = ((long long)Wo + OUTC - 1) / OUTC;
    const long long tilesY = ((long long)Ho + OUTR - 1) / OUTR;
    const long long T = tilesX * tilesY;
    if (T <= 0 || T > (1LL << 30)) return false;
    const long long npairs = (T + 1) / 2;
    long long grid = npairs < (long long)num_sms() ? npairs : (long long)num_sms();
    if (grid_override > 0 && grid > grid_override) grid = grid_override;
    if (grid < 1) grid = 1;

    cudaGetLastError();  // clear any stale non-sticky error before launching
    conv2d_fft<<<(unsigned)grid, FFT_NT, FFT_SMEM>>>(in, ker, out, g_fft_F, H, W, kh, kw, Ho, Wo,
                                                      OUTR, OUTC, (int)tilesX, (int)T,
                                                      (int)npairs);
    return cudaGetLastError() == cudaSuccess;
}

// ---- FFT self-test against an fp64 reference (same error measure as the checker) ----
__device__ __forceinline__ float st_u01(uint32_t i, uint32_t seed) {
    uint32_t x = (i * 2654435761u) ^ seed;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}
// mode 0: uniform [-1,1); 1: uniform [0,1); 2: roughly normal (sum of 4 uniforms)
__global__ void fill_mode_kernel(float* p, int n, uint32_t seed, int mode) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const uint32_t u = (uint32_t)i;
        float v;
        if (mode == 0) {
            v = 2.0f * st_u01(u, seed) - 1.0f;
        } else if (mode == 1) {
            v = st_u01(u, seed);
        } else {
            const float s = st_u01(u, seed) + st_u01(u, seed ^ 0x5bd1e995u) +
                            st_u01(u, seed ^ 0x27d4eb2fu) + st_u01(u, seed ^ 0x165667b1u);
            v = (s - 2.0f) * 1.7320508f;
        }
        p[i] = v;
    }
}
__global__ void ref_f64_kernel(const float* in, const float* ker, int W, int kh, int kw, int Ho,
                               int Wo, double* ref, double* mag) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)Ho * (long long)Wo) return;
    const int r = (int)(idx / Wo);
    const int c = (int)(idx - (long long)r * Wo);
    double s = 0.0, a = 0.0;
    for (int m = 0; m < kh; ++m) {
        const float* xr = in + (size_t)(r + m) * (size_t)W + c;
        const float* wr = ker + (size_t)m * kw;
        for (int n = 0; n < kw; ++n) {
            const double t = (double)xr[n] * (double)wr[n];
            s += t;
            a += fabs(t);
        }
    }
    ref[idx] = s;
    mag[idx] = a;
}
__global__ void ratio_kernel(const float* got, const double* ref, const double* mag, int n,
                             unsigned int* maxbits) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const double d = fabs((double)got[i] - ref[i]);
        const double tol = 1e-7 + 1e-6 * fabs(ref[i]) + 1e-6 * mag[i];
        const double r = d / tol;
        const float rf = (r < 1.0e30) ? (float)r : 1.0e30f;  // NaN -> 1e30
        atomicMax(maxbits, __float_as_uint(rf));
    }
}

float fft_selftest_one(int H, int W, int kh, int kw, int xmode, int wmode, int grid_override) {
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    const size_t nin = (size_t)H * W, nk = (size_t)kh * kw, nout = (size_t)Ho * Wo;
    float* d_in = nullptr;
    float* d_k = nullptr;
    float* d_o = nullptr;
    double* d_ref = nullptr;
    double* d_mag = nullptr;
    unsigned int* d_max = nullptr;
    float result = 1.0e30f;
    const bool ok = cudaMalloc(&d_in, nin * sizeof(float)) == cudaSuccess &&
                    cudaMalloc(&d_k, nk * sizeof(float)) == cudaSuccess &&
                    cudaMalloc(&d_o, nout * sizeof(float)) == cudaSuccess &&
                    cudaMalloc(&d_ref, nout * sizeof(double)) == cudaSuccess &&
                    cudaMalloc(&d_mag, nout * sizeof(double)) == cudaSuccess &&
                    cudaMalloc(&d_max, sizeof(unsigned int)) == cudaSuccess;
    if (ok) {
        fill_mode_kernel<<<(unsigned)((nin + 255) / 256), 256>>>(
            d_in, (int)nin, 0x2468ace1u ^ (uint32_t)(H * 7919 + kh), xmode);
        fill_mode_kernel<<<(unsigned)((nk + 255) / 256), 256>>>(
            d_k, (int)nk, 0x9e3779b9u ^ (uint32_t)(kw * 104729 + kh), wmode);
        cudaMemset(d_o, 0xFF, nout * sizeof(float));  // NaN
        cudaMemset(d_max, 0, sizeof(unsigned int));
        ref_f64_kernel<<<(unsigned)((nout + 255) / 256), 256>>>(d_in, d_k, W, kh, kw, Ho, Wo,
                                                                 d_ref, d_mag);
        if (launch_fft(d_in, d_k, d_o, H, W, kh, kw, Ho, Wo, grid_override)) {
            ratio_kernel<<<(unsigned)((nout + 255) / 256), 256>>>(d_o, d_ref, d_mag, (int)nout,
                                                                  d_max);
            unsigned int hb = 0;
            if (cudaMemcpy(&hb, d_max, sizeof(hb), cudaMemcpyDeviceToHost) == cudaSuccess &&
                cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess) {
                float r = 1.0e30f;
                std::memcpy(&r, &hb, sizeof(r));
                result = r;
            }
        }
    }
    cudaGetLastError();
    cudaFree(d_in);
    cudaFree(d_k);
    cudaFree(d_o);
    cudaFree(d_ref);
    cudaFree(d_mag);
    cudaFree(d_max);
    cudaGetLastError();
    return result;
}

// Accuracy gate per kernel-size class (worst case of several odd shapes and data kinds;
// the smallest kernels of a class have the least margin, so they are included).
bool fft_class_ok(int cls) {
    if (cls < 0 || cls > 1) return false;
    if (g_fft_status[cls] == 0) {
        // H, W, kh, kw, x mode, w mode, grid override (small grids: several pairs per CTA)
        static const int tests[2][4][7] = {
            {{283, 301, 15, 14, 0, 0, 2},
             {283, 301, 16, 16, 1, 1, 0},
             {250, 270, 10, 21, 1, 2, 3},
             {261, 300, 40, 5, 2, 0, 0}},
            {{300, 333, 32, 32, 2, 2, 2},
             {300, 333, 29, 23, 1, 1, 0},
             {291, 317, 24, 25, 0, 1, 3},
             {260, 280, 48, 45, 1, 0, 0}}};
        float worst = 0.0f;
        for (int i = 0; i < 4 && worst <= FFT_GATE; ++i) {
            const int* t = tests[cls][i];
            const float r = fft_selftest_one(t[0], t[1], t[2], t[3], t[4], t[5], t[6]);
            if (!(r <= worst)) worst = r;
        }
        g_fft_status[cls] = (worst <= FFT_GATE) ? 1 : -1;
    }
    return g_fft_status[cls] == 1;
}


// Per-shape choice: 1 = wgmma path, 2 = round-3 path, 3 = FFT path.
struct TuneEntry {
    int H, W, kh, kw, choice;
};
TuneEntry g_tune[32];
int g_ntune = 0;
int g_wg_status[3] = {0, 0, 0};  // per kind: 0 untested, 1 ok, -1 disabled

int tune_lookup(int H, int W, int kh, int kw) {
    for (int i = 0; i < g_ntune && i < 32; ++i)
        if (g_tune[i].H == H && g_tune[i].W == W && g_tune[i].kh == kh && g_tune[i].kw == kw)
            return g_tune[i].choice;
    return 0;
}
void tune_store(int H, int W, int kh, int kw, int choice) {
    const int slot = g_ntune % 32;
    g_tune[slot].H = H;
    g_tune[slot].W = W;
    g_tune[slot].kh = kh;
    g_tune[slot].kw = kw;
    g_tune[slot].choice = choice;
    ++g_ntune;
}

// Times the candidate paths on the real call; the output is left by the round-3 path (run last).
// wgkind == 0: no wgmma candidate.
int tune_run(int wgkind, bool try_fft, const float* in, const float* ker, float* out, int H,
             int W, int kh, int kw, int Ho, int Wo) {
    static cudaEvent_t e0 = nullptr, e1 = nullptr;
    static bool ev_ok = false;
    if (!ev_ok) {
        if (cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
            ev_ok = true;
        } else {
            cudaGetLastError();
        }
    }
    if (!ev_ok) {
        run_old(in, ker, out, H, W, kh, kw, Ho, Wo);
        return 2;
    }
    float t_wg = 3.0e38f, t_fft = 3.0e38f, t_old = 3.0e38f;
    bool okw = wgkind != 0;
    bool okf = try_fft;
    for (int rep = 0; rep < 3; ++rep) {
        if (okw) {
            cudaEventRecord(e0);
            okw = launch_wg_kind(wgkind, in, ker, out, H, W, kh, kw, Ho, Wo, 0);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms = 0.0f;
            if (okw && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms < t_wg) t_wg = ms;
        }
        if (okf) {
            cudaEventRecord(e0);
            okf = launch_fft(in, ker, out, H, W, kh, kw, Ho, Wo, 0);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms = 0.0f;
            if (okf && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms < t_fft) t_fft = ms;
        }
        cudaEventRecord(e0);
        run_old(in, ker, out, H, W, kh, kw, Ho, Wo);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms < t_old) t_old = ms;
    }
    cudaGetLastError();
    // fastest candidate first, then it must beat the round-3 path by 3%
    int cand = 0;
    float tc = 3.0e38f;
    if (okw && t_wg < tc) {
        cand = 1;
        tc = t_wg;
    }
    if (okf && t_fft < tc) {
        cand = 3;
        tc = t_fft;
    }
    return (cand != 0 && tc < 0.97f * t_old) ? cand : 2;
}

}  // namespace

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh > 0 && kw > 0 && H > 0 && W > 0 && Ho > 0 && Wo > 0) {
        bool done = false;
        const int kind = wg_kind(kw);
        const bool wg_shape = (kind != 0) && wg_tiles(kind, Ho, Wo) >= 3LL * num_sms();
        const int fcls = fft_class(kh, kw);
        const bool fft_shape = fcls >= 0;
        if (wg_shape || fft_shape) {
            int ch = tune_lookup(H, W, kh, kw);
            if (ch == 0) {
                bool wg_ok = false;
                if (wg_shape) {
                    if (g_wg_status[kind] == 0) g_wg_status[kind] = wg_selftest(kind) ? 1 : -1;
                    wg_ok = (g_wg_status[kind] == 1);
                }
                const bool fft_ok = fft_shape && fft_class_ok(fcls);
                if (wg_ok || fft_ok) {
                    ch = tune_run(wg_ok ? kind : 0, fft_ok, input, kernel, output, H, W, kh, kw,
                                  Ho, Wo);
                    done = true;  // tune_run leaves a complete result
                } else {
                    ch = 2;
                }
                tune_store(H, W, kh, kw, ch);
            } else if (ch == 1) {
                done = launch_wg_kind(kind, input, kernel, output, H, W, kh, kw, Ho, Wo, 0);
            } else if (ch == 3) {
                done = launch_fft(input, kernel, output, H, W, kh, kw, Ho, Wo, 0);
            }
        }
        if (!done) run_old(input, kernel, output, H, W, kh, kw, Ho, Wo);
    }
    cudaDeviceSynchronize();
}

