// conv_2d (fp32): valid 2-D cross-correlation (no kernel flip)
//   out[r][c] = sum_{m<kh} sum_{n<kw} in[r+m][c+n] * ker[m][n]
//
// Paths
//  (A) large problems with 10 <= kw <= 33: Hopper wgmma.mma_async (A from registers, RS),
//      CTAs of up to 3 warpgroups that share one smem copy of the Toeplitz weight bands.
//      Round 6 restructuring:
//        * loop order inverted: the compile-time 16-column chunk q is the outer loop, the kernel
//          rows the inner runtime loop, in groups of R = 2 rows.  All (m, q) products of one q
//          share the accumulator window, so the 3R wgmmas of a group chain into one accumulator
//          set: one fence / commit / wait<1> / flush per group (half the round trips);
//        * kernel rows padded to a multiple of 2R with zero Toeplitz bands (+ zero tile rows),
//          so the two accumulator sets have a compile-time parity at every chunk boundary;
//        * the next tile of a warpgroup is prefetched into L2 (cp.async.bulk.prefetch.L2) right
//          after the current tile's conversion; max|x| is taken by each thread over its own
//          cp.async data (one barrier less per tile);
//        * split mode (mid-size problems): the kernel rows of one tile are spread over 2 or 3
//          warpgroups of a CTA, each with its own scale; the unscaled partials are summed in a
//          fixed order (deterministic) through the staging buffers;
//        * self-test against a float64 reference with the real tolerance (max err/tol <= 0.5),
//          R = 1 fallback, and a per-shape autotune over {persistent, spread, split2, split3,
//          round-3 path}.
//  (B) round-3 path: scaled-FP16 two-term split implicit GEMM on mma.sync (kw <= 41),
//      then a SIMT fp32 kernel, then a naive kernel.
//
// Numerics of both tensor paths:
//   per tile s_a = 2^ea maps max|x| into [2^14, 2^15), s_w = 2^ew does the same for max|w|;
//   x*s_a = xh + xl, w*s_w = wh + wl (fp16 each); lo(x)*hi(w) + hi(x)*lo(w) + hi(x)*hi(w) is
//   accumulated on the tensor cores (small terms first inside a group), each group's partial is
//   added into fp32 sums with a plain FADD; out = (sum * 2^-ea) * 2^-ew.
//
// wgmma formulation (per kernel row m, per 16-column input chunk q of the tile):
//   D[r][n'] = sum_k A[r][k] * B'[k][n'],  A[r][k] = x[r+m][16q+k],
//   B'[k][n'] = w[m][k + n' - 15],  output column c = 16q + 15 - n'   (reversed columns).
//   B' is Toeplitz: core matrix (n-block b, k-block kb) depends only on b+kb, so the whole band
//   for (m, hi/lo) is NS = N/8+1 consecutive 8x8 fp16 core matrices and the no-swizzle K-major
//   descriptor uses LBO = SBO = 128 B.  Edge chunks use smaller N (start address shifted).
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
// L2 prefetch of a contiguous global range (16-byte aligned address, size multiple of 16)
__device__ __forceinline__ void prefetch_l2_bulk(const void* gptr, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(gptr), "r"(bytes)
                 : "memory");
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
    static constexpr int BM_UNITS = BM_BYTES / 16; // same, in descriptor units
    static_assert(((RSB / 16) & 1) == 1, "row stride must be an odd multiple of 16 bytes");
    static_assert(OST * 4 <= RSB, "output staging must fit");
    static_assert(OW % 8 == 0, "tile width");
    static_assert(OW % 4 == 0, "L2 prefetch alignment");
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

// A fragments (hi and lo) of R consecutive kernel rows of one chunk
template <class C, int R>
__device__ __forceinline__ void load_a(uint32_t (&ah)[R][4], uint32_t (&al)[R][4],
                                       uint32_t addr) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        ldsm_x4(ah[r], addr + (uint32_t)(r * C::RSB));
        ldsm_x4(al[r], addr + (uint32_t)(r * C::RSB + 2 * C::SC));
    }
}

// One commit group: R kernel rows of chunk Q chained into one accumulator set.
// Small terms first (lo(x)*hi(w), hi(x)*lo(w) of every row), then the hi(x)*hi(w) terms.
template <class C, int R, int Q>
__device__ __forceinline__ void issue_group(float (&t)[C::NR], const uint32_t (&ah)[R][4],
                                            const uint32_t (&al)[R][4], uint64_t dRow) {
    typedef ChunkGeom<C, Q> G;
    fence_regs(t);
    wgmma_fence();
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const uint64_t dHi = dRow + (uint64_t)(r * C::BM_UNITS + G::N0);
        wg_mma(IntTag<G::NN>(), t, al[r], dHi, (r == 0) ? 0 : 1);          // lo(x)*hi(w)
        wg_mma(IntTag<G::NN>(), t, ah[r], dHi + (uint64_t)(C::NS * 8), 1); // hi(x)*lo(w)
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const uint64_t dHi = dRow + (uint64_t)(r * C::BM_UNITS + G::N0);
        wg_mma(IntTag<G::NN>(), t, ah[r], dHi, 1);                          // hi(x)*hi(w)
    }
    wgmma_commit();
}

// issue group (set S), wait for the previous group (set 1-S), flush it (chunk QF), and load
// the A fragments of the next group into the set just freed.
template <class C, int R, int Q, int S, int QF, bool FL>
__device__ __forceinline__ void pipe_step(float (&sum)[C::NB][4], float (&tmp)[2][C::NR],
                                          uint32_t (&ah)[2][R][4], uint32_t (&al)[2][R][4],
                                          uint64_t dRow, uint32_t aNext) {
    issue_group<C, R, Q>(tmp[S], ah[S], al[S], dRow);
    wgmma_wait<1>();
    fence_regs(tmp[1 - S]);
    if (FL) flush_chunk<C, QF>(sum, tmp[1 - S]);
    load_a<C, R>(ah[1 - S], al[1 - S], aNext);
}

// All G (even) groups of chunk Q.  On entry set 0 holds the A of group 0 of this chunk and, for
// Q > 0, the last group of chunk Q-1 (set 1) may still be in flight.
template <class C, int R, int Q>
__device__ __forceinline__ void chunk_pass(float (&sum)[C::NB][4], float (&tmp)[2][C::NR],
                                           uint32_t (&ah)[2][R][4], uint32_t (&al)[2][R][4],
                                           uint64_t dRow0, uint32_t aRow0, int G) {
    constexpr uint32_t ASTEP = (uint32_t)(R * C::RSB);
    constexpr uint32_t DSTEP = (uint32_t)(R * C::BM_UNITS);
    const uint32_t aq = aRow0 + 32u * (uint32_t)Q;
    const uint32_t anc = (Q + 1 < C::NQ) ? (aRow0 + 32u * (uint32_t)(Q + 1)) : aRow0;

    pipe_step<C, R, Q, 0, (Q > 0 ? Q - 1 : 0), (Q > 0)>(sum, tmp, ah, al, dRow0, aq + ASTEP);
    pipe_step<C, R, Q, 1, Q, true>(sum, tmp, ah, al, dRow0 + (uint64_t)DSTEP,
                                   (G > 2) ? (aq + 2u * ASTEP) : anc);
#pragma unroll 1
    for (int j = 2; j < G; j += 2) {
        const uint32_t aj = aq + (uint32_t)j * ASTEP;
        const uint64_t dj = dRow0 + (uint64_t)((uint32_t)j * DSTEP);
        pipe_step<C, R, Q, 0, Q, true>(sum, tmp, ah, al, dj, aj + ASTEP);
        pipe_step<C, R, Q, 1, Q, true>(sum, tmp, ah, al, dj + (uint64_t)DSTEP,
                                       (j + 2 < G) ? (aj + 2u * ASTEP) : anc);
    }
}

template <class C, int R, int Q, bool END = (Q >= C::NQ)>
struct ChunkLoop {
    static __device__ __forceinline__ void run(float (&sum)[C::NB][4], float (&tmp)[2][C::NR],
                                               uint32_t (&ah)[2][R][4],
                                               uint32_t (&al)[2][R][4], uint64_t dRow0,
                                               uint32_t aRow0, int G) {
        chunk_pass<C, R, Q>(sum, tmp, ah, al, dRow0, aRow0, G);
        ChunkLoop<C, R, Q + 1>::run(sum, tmp, ah, al, dRow0, aRow0, G);
    }
};
template <class C, int R, int Q>
struct ChunkLoop<C, R, Q, true> {
    static __device__ __forceinline__ void run(float (&)[C::NB][4], float (&)[2][C::NR],
                                               uint32_t (&)[2][R][4], uint32_t (&)[2][R][4],
                                               uint64_t, uint32_t, int) {}
};

// blockDim = 128 * nwg (nwg <= 3).
//  nsplit == 1: every warpgroup processes its own 64 x OW tiles (static round robin), cnt =
//               padded kh.
//  nsplit > 1 (== nwg): all warpgroups of the CTA work on the same tile, warpgroup p takes the
//               kernel rows [p*cnt, p*cnt + cnt); the partials are summed in a fixed order.
// B bands (nsplit*cnt rows, zero past kh) are shared by the CTA.
template <class C, int R>
__global__ void __launch_bounds__(384, 1)
conv2d_wg(const float* __restrict__ in, const float* __restrict__ ker, float* __restrict__ out,
          int H, int W, int kh, int kw, int Ho, int Wo, int tilesX, int T, int vec4,
          int nsplit, int cnt) {
    extern __shared__ __align__(128) unsigned char smem_wg[];

    const int tid = threadIdx.x;
    const int nthr = blockDim.x;
    const int nwg = nthr >> 7;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int khp = nsplit * cnt;
    const int brows = C::OH + cnt - 1;
    const int trows_real = C::OH + kh - 1;
    const int nk = kh * kw;

    uint32_t* sB = reinterpret_cast<uint32_t*>(smem_wg);
    const size_t bbytes = (size_t)khp * (size_t)C::BM_BYTES;
    const size_t bufbytes = (size_t)brows * (size_t)C::RSB;
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
        const int nwords = khp * 2 * C::NS * 32;
        for (int idx = tid; idx < nwords; idx += nthr) {
            const int jp = idx & 3;
            const int i = (idx >> 2) & 7;
            const int rest = idx >> 5;  // (m*2 + h)*NS + s
            const int s = rest % C::NS;
            const int mh = rest / C::NS;
            const int h = mh & 1;
            const int m = mh >> 1;
            const bool mok = m < kh;
            const int e0 = 8 * s + i + 2 * jp - 15;
            const float* wrow = ker + (size_t)(mok ? m : 0) * (size_t)kw;
            const float v0 = (mok && e0 >= 0 && e0 < kw) ? __ldg(wrow + e0) * sw : 0.0f;
            const float v1 =
                (mok && e0 + 1 >= 0 && e0 + 1 < kw) ? __ldg(wrow + e0 + 1) * sw : 0.0f;
            __half h0, l0, h1, l1;
            split_f16(v0, h0, l0);
            split_f16(v1, h1, l1);
            sB[idx] = h ? pack_h2(l0, l1) : pack_h2(h0, h1);
        }
    }
    fence_proxy_async_smem();  // generic-proxy smem writes -> visible to wgmma (async proxy)
    __syncthreads();

    // ---- per-warpgroup tile loop ----
    const int wg = tid >> 7;
    const int wtid = tid & 127;
    const int wwarp = wtid >> 5;
    const int g = lane >> 2;
    const int q4 = lane & 3;
    const bool split = nsplit > 1;
    const int part = split ? wg : 0;
    const int tg = split ? 0 : wg;
    const int ntg = split ? 1 : nwg;
    const int mo = part * cnt;          // first kernel row of this warpgroup
    const int G = cnt / R;              // groups per chunk (even)
    const int rlim = trows_real - mo;   // buffer rows >= rlim are zero padding
    const uint32_t barid = 1u + (uint32_t)wg;
    unsigned char* buf = smem_wg + bbytes + (size_t)wg * bufbytes;
    float* sT = reinterpret_cast<float*>(buf);
    const uint32_t aRow0 = smem_u32(buf) +
                           (uint32_t)((wwarp * 16 + (lane & 15)) * C::RSB + 16 * (lane >> 4));
    const uint64_t dRow0 =
        desc_nosw(smem_u32(smem_wg)) + (uint64_t)((uint32_t)mo * (uint32_t)C::BM_UNITS);

    const int step = (int)gridDim.x * ntg;
    for (int t = (int)blockIdx.x + (int)gridDim.x * tg; t < T; t += step) {
        const int by = t / tilesX;
        const int bx = t - by * tilesX;
        const int r0 = by * C::OH;
        const int c0 = bx * C::OW;
        const int rb = r0 + mo;  // global input row of buffer row 0

        // 1. fp32 input rows -> smem (zero past the edges and in padding rows); each thread
        //    takes max |x| over its own elements once they have landed.
        float amax = 0.0f;
        if (vec4) {
            constexpr int Q4 = C::SC / 4;
            const int total = brows * Q4;
            for (int idx = wtid; idx < total; idx += 128) {
                const int rr = idx / Q4;
                const int qq = idx - rr * Q4;
                const int gr = rb + rr;
                const int gc = c0 + 4 * qq;
                const bool ok = (rr < rlim) && (gr < H) && (gc < W);  // W % 4 == 0
                const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
                cp_async_16(sT + rr * C::RSF + 4 * qq, src, ok ? 16 : 0);
            }
            cp_async_commit();
            cp_async_wait_all();
            for (int idx = wtid; idx < total; idx += 128) {
                const int rr = idx / Q4;
                const int qq = idx - rr * Q4;
                const float4 v = *reinterpret_cast<const float4*>(sT + rr * C::RSF + 4 * qq);
                amax = fmaxf(amax,
                             fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
            }
        } else {
            const int total = brows * C::SC;
            for (int idx = wtid; idx < total; idx += 128) {
                const int rr = idx / C::SC;
                const int cc = idx - rr * C::SC;
                const int gr = rb + rr;
                const int gc = c0 + cc;
                const bool ok = (rr < rlim) && (gr < H) && (gc < W);
                const float* src = ok ? (in + (size_t)gr * (size_t)W + gc) : in;
                cp_async_f32(sT + rr * C::RSF + cc, src, ok ? 4 : 0);
            }
            cp_async_commit();
            cp_async_wait_all();
            for (int idx = wtid; idx < total; idx += 128) {
                const int rr = idx / C::SC;
                const int cc = idx - rr * C::SC;
                amax = fmaxf(amax, fabsf(sT[rr * C::RSF + cc]));
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (lane == 0) sRed[16 + 4 * wg + wwarp] = amax;
        bar_wg(barid);  // tile complete in smem + partial maxima visible
        amax = fmaxf(fmaxf(sRed[16 + 4 * wg + 0], sRed[16 + 4 * wg + 1]),
                     fmaxf(sRed[16 + 4 * wg + 2], sRed[16 + 4 * wg + 3]));
        const int ea = scale_exp(amax);
        const float sa = exp2i(ea);
        const float ua = exp2i(-ea);

        // 2. in-place conversion, one row per warp: fp32 row -> [hi SC halves][lo SC halves]
        {
            constexpr int NP2 = C::SC / 2;
            constexpr int NPL = (NP2 + 31) / 32;
            for (int rr = wwarp; rr < brows; rr += 4) {
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

        // 2b. prefetch this warpgroup's next tile into L2
        if (vec4) {
            const int tn = t + step;
            if (tn < T) {
                const int byn = tn / tilesX;
                const int bxn = tn - byn * tilesX;
                const int rbn = byn * C::OH + mo;
                const int c0n = bxn * C::OW;
                int cols = W - c0n;
                if (cols > C::SC) cols = C::SC;
                const int nrows = (brows < rlim) ? brows : rlim;
                if (cols > 0) {
                    for (int rr = wtid; rr < nrows; rr += 128) {
                        const int gr = rbn + rr;
                        if (gr < H)
                            prefetch_l2_bulk(in + (size_t)gr * (size_t)W + c0n,
                                             (uint32_t)cols * 4u);
                    }
                }
            }
        }

        // 3. main loop: chunks (compile time) x groups of R kernel rows (runtime)
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
        uint32_t ah[2][R][4], al[2][R][4];
        load_a<C, R>(ah[0], al[0], aRow0);
        ChunkLoop<C, R, 0>::run(sum, tmp, ah, al, dRow0, aRow0, G);
        wgmma_wait<0>();
        fence_regs(tmp[1]);
        flush_chunk<C, C::NQ - 1>(sum, tmp[1]);
        bar_wg(barid);  // all warps of this warpgroup done reading the hi/lo tile

        // 4. epilogue: unscale, stage (reversed column order inside each 8-block)
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
        if (!split) {
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
        } else {
            __syncthreads();  // all partials staged
            const int nw = nthr >> 5;
            const float* st0 = reinterpret_cast<const float*>(smem_wg + bbytes);
            const int pstride = (int)(bufbytes / sizeof(float));
            for (int rr = warp; rr < C::OH; rr += nw) {
                const int orow = r0 + rr;
                if (orow >= Ho) break;
                float* gout = out + (size_t)orow * (size_t)Wo + c0;
                const float* srow = st0 + rr * C::OST;
#pragma unroll
                for (int k = 0; k < (C::OW + 31) / 32; ++k) {
                    const int cc = lane + 32 * k;
                    if (cc < C::OW && c0 + cc < Wo) {
                        float v = srow[cc];
                        for (int p = 1; p < nwg; ++p) v += srow[p * pstride + cc];
                        gout[cc] = v;
                    }
                }
            }
            __syncthreads();  // staging reads done before the next tile's loads
        }
    }
}

// Self-test helpers
__global__ void fill_hash_kernel(float* p, int n, uint32_t seed, int positive) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
        const float u = (float)(x >> 8) * (1.0f / 16777216.0f);  // [0, 1)
        p[i] = positive ? u : (u * 2.0f - 1.0f);
    }
}
// float64 reference; records max(|got-ref| / (atol + rtol|ref| + mtol*mag)) (NaN -> huge)
__global__ void ref_check_kernel(const float* __restrict__ in, const float* __restrict__ ker,
                                 const float* __restrict__ got, int W, int kh, int kw, int Ho,
                                 int Wo, float* maxratio) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)Ho * (long long)Wo) return;
    const int r = (int)(i / Wo);
    const int c = (int)(i - (long long)r * Wo);
    double s = 0.0, mg = 0.0;
    for (int m = 0; m < kh; ++m) {
        const float* rowp = in + (size_t)(r + m) * (size_t)W + c;
        const float* kp = ker + (size_t)m * kw;
        for (int n = 0; n < kw; ++n) {
            const double pr = (double)rowp[n] * (double)kp[n];
            s += pr;
            mg += fabs(pr);
        }
    }
    const double tol = 1e-7 + 1e-6 * fabs(s) + 1e-6 * mg;
    const double d = fabs((double)got[i] - s);
    float ratio = (float)(d / tol);
    if (!(ratio <= 3.0e38f)) ratio = 3.0e38f;
    atomicMax(reinterpret_cast<int*>(maxratio), __float_as_int(ratio));
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
size_t wg_smem_bytes(int khp, int cnt, int nwg) {
    return (size_t)khp * (size_t)C::BM_BYTES +
           (size_t)nwg * (size_t)(C::OH + cnt - 1) * (size_t)C::RSB + 64 * sizeof(float);
}

// mode 0: persistent, up to 3 independent warpgroups per CTA
// mode 1: spread, 1 warpgroup per CTA (several CTAs per SM)
// mode 2/3: kernel rows of each tile split over 2/3 warpgroups of one CTA
template <class C, int R>
bool launch_wg(const float* in, const float* ker, float* out, int H, int W, int kh, int kw,
               int Ho, int Wo, int mode, int grid_override) {
    const int limit = smem_optin_limit();
    const long long ow = (long long)C::OW;
    const long long oh = (long long)C::OH;
    const long long tilesX = ((long long)Wo + ow - 1) / ow;
    const long long tilesY = ((long long)Ho + oh - 1) / oh;
    const long long T = tilesX * tilesY;
    if (T <= 0 || T > (1LL << 30)) return false;
    if (kh <= 0 || kw <= 0 || kw - 1 > C::P) return false;
    const long long sms = (long long)num_sms();

    int nsplit = 1, nwg = 1, cnt = 0;
    long long grid = 1;
    if (mode == 0 || mode == 1) {
        cnt = ((kh + 2 * R - 1) / (2 * R)) * (2 * R);
        nwg = (mode == 0) ? 3 : 1;
        while (nwg > 0 && wg_smem_bytes<C>(cnt, cnt, nwg) > (size_t)limit) --nwg;
        if (nwg <= 0) return false;
        if (mode == 0) {
            grid = (T + nwg - 1) / nwg;
            if (grid > sms) grid = sms;
        } else {
            grid = T;
            if (grid > 3LL * sms) grid = 3LL * sms;
        }
    } else if (mode == 2 || mode == 3) {
        nsplit = mode;
        nwg = mode;
        const int per = (kh + nsplit - 1) / nsplit;
        cnt = ((per + 2 * R - 1) / (2 * R)) * (2 * R);
        if (wg_smem_bytes<C>(nsplit * cnt, cnt, nwg) > (size_t)limit) return false;
        grid = T;
        if (grid > sms) grid = sms;
    } else {
        return false;
    }
    if (grid_override > 0 && grid > (long long)grid_override) grid = grid_override;
    if (grid < 1) grid = 1;
    const size_t smem = wg_smem_bytes<C>(nsplit * cnt, cnt, nwg);

    static bool configured = false;
    if (!configured) {
        if (cudaFuncSetAttribute(conv2d_wg<C, R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 limit) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        cudaFuncSetAttribute(conv2d_wg<C, R>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        cudaGetLastError();
        configured = true;
    }
    const int vec4 =
        (((W & 3) == 0) && ((reinterpret_cast<uintptr_t>(in) & 15) == 0)) ? 1 : 0;
    conv2d_wg<C, R><<<(unsigned)grid, 128 * nwg, smem>>>(in, ker, out, H, W, kh, kw, Ho, Wo,
                                                          (int)tilesX, (int)T, vec4, nsplit,
                                                          cnt);
    return cudaGetLastError() == cudaSuccess;
}

int wg_kind(int kw) {
    if (kw >= 10 && kw <= 17) return 1;
    if (kw >= 18 && kw <= 33) return 2;
    return 0;
}

bool launch_wg_sel(int kind, int R, int mode, const float* in, const float* ker, float* out,
                   int H, int W, int kh, int kw, int Ho, int Wo, int grid_override) {
    if (kind == 1) {
        if (R == 2)
            return launch_wg<WgA, 2>(in, ker, out, H, W, kh, kw, Ho, Wo, mode, grid_override);
        if (R == 1)
            return launch_wg<WgA, 1>(in, ker, out, H, W, kh, kw, Ho, Wo, mode, grid_override);
    } else if (kind == 2) {
        if (R == 2)
            return launch_wg<WgB, 2>(in, ker, out, H, W, kh, kw, Ho, Wo, mode, grid_override);
        if (R == 1)
            return launch_wg<WgB, 1>(in, ker, out, H, W, kh, kw, Ho, Wo, mode, grid_override);
    }
    return false;
}

long long wg_tiles(int kind, int Ho, int Wo) {
    const long long ow = (kind == 1) ? (long long)(+WgA::OW) : (long long)(+WgB::OW);
    return (((long long)Ho + 63) / 64) * (((long long)Wo + ow - 1) / ow);
}

// One self-test problem: returns the max err/tol ratio against float64 (1e30 on failure).
float wg_test_one(int kind, int R, int mode, int H, int W, int kh, int kw, int positive,
                  int grid_override) {
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (Ho <= 0 || Wo <= 0) return 1e30f;
    const size_t nin = (size_t)H * W, nk = (size_t)kh * kw, nout = (size_t)Ho * Wo;
    const size_t rin = (nin + 63) & ~(size_t)63;
    const size_t rk = (nk + 63) & ~(size_t)63;
    const size_t rout = (nout + 63) & ~(size_t)63;
    float* base = nullptr;
    if (cudaMalloc(&base, (rin + rk + rout + 64) * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        return 1e30f;
    }
    float* d_in = base;
    float* d_k = d_in + rin;
    float* d_o = d_k + rk;
    float* d_r = d_o + rout;
    fill_hash_kernel<<<(unsigned)((nin + 255) / 256), 256>>>(
        d_in, (int)nin, 0x12345679u + 977u * (uint32_t)(mode + 4 * kind), positive);
    fill_hash_kernel<<<(unsigned)((nk + 255) / 256), 256>>>(d_k, (int)nk, 0x9e3779b9u,
                                                             positive);
    cudaMemset(d_o, 0xFF, nout * sizeof(float));
    cudaMemset(d_r, 0, sizeof(float));
    bool ok = launch_wg_sel(kind, R, mode, d_in, d_k, d_o, H, W, kh, kw, Ho, Wo, grid_override);
    if (ok)
        ref_check_kernel<<<(unsigned)((nout + 255) / 256), 256>>>(d_in, d_k, d_o, W, kh, kw, Ho,
                                                                   Wo, d_r);
    float hr = 1e30f;
    if (cudaMemcpy(&hr, d_r, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) ok = false;
    if (cudaDeviceSynchronize() != cudaSuccess) ok = false;
    if (cudaGetLastError() != cudaSuccess) ok = false;
    cudaFree(base);
    if (!ok) return 1e30f;
    if (!(hr >= 0.0f) || hr > 1e30f) return 1e30f;
    return hr;
}

inline float fmax_h(float a, float b) { return a > b ? a : b; }

// main-path (nsplit == 1) tests: positive data (truncation bias), signed data, odd shapes,
// scalar loads, padded kernel rows, several tiles per warpgroup
float wg_tests_main(int kind, int R) {
    float m = 0.0f;
    if (kind == 1) {
        m = fmax_h(m, wg_test_one(1, R, 0, 200, 300, 16, 16, 1, 2));
        m = fmax_h(m, wg_test_one(1, R, 0, 149, 251, 5, 11, 0, 2));
        m = fmax_h(m, wg_test_one(1, R, 1, 133, 180, 17, 17, 1, 0));
    } else if (kind == 2) {
        m = fmax_h(m, wg_test_one(2, R, 0, 220, 332, 32, 32, 1, 2));
        m = fmax_h(m, wg_test_one(2, R, 0, 157, 263, 5, 27, 0, 2));
        m = fmax_h(m, wg_test_one(2, R, 1, 140, 212, 19, 18, 1, 0));
    } else {
        m = 1e30f;
    }
    return m;
}
float wg_tests_split(int kind, int R) {
    float m = 0.0f;
    if (kind == 1) {
        m = fmax_h(m, wg_test_one(1, R, 3, 200, 300, 16, 16, 0, 2));
        m = fmax_h(m, wg_test_one(1, R, 2, 131, 257, 13, 16, 1, 2));
    } else if (kind == 2) {
        m = fmax_h(m, wg_test_one(2, R, 3, 220, 332, 32, 32, 0, 2));
        m = fmax_h(m, wg_test_one(2, R, 2, 150, 201, 11, 33, 1, 2));
    } else {
        m = 1e30f;
    }
    return m;
}

int g_wg_R[3] = {0, 0, 0};      // per kind: 0 untested, -1 disabled, else R (2 or 1)
int g_wg_split[3] = {0, 0, 0};  // per kind: 1 split modes usable, -1 not

void wg_selftest(int kind) {
    int R = -1;
    const float r2 = wg_tests_main(kind, 2);
    if (r2 <= 0.5f) {
        R = 2;
    } else {
        const float r1 = wg_tests_main(kind, 1);
        if (r1 <= 0.5f)
            R = 1;
        else if (r2 <= 0.7f && r2 <= r1)
            R = 2;
        else if (r1 <= 0.7f)
            R = 1;
    }
    g_wg_R[kind] = R;
    g_wg_split[kind] = -1;
    if (R > 0) {
        const float rs = wg_tests_split(kind, R);
        g_wg_split[kind] = (rs <= 0.7f) ? 1 : -1;
    }
}

// Per-shape choice: 1..4 = wgmma modes 0..3, 5 = round-3 path.
struct TuneEntry {
    int H, W, kh, kw, choice;
};
TuneEntry g_tune[32];
int g_ntune = 0;

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

bool run_choice(int code, int kind, int R, const float* in, const float* ker, float* out, int H,
                int W, int kh, int kw, int Ho, int Wo) {
    if (code == 5) {
        run_old(in, ker, out, H, W, kh, kw, Ho, Wo);
        return true;
    }
    if (code >= 1 && code <= 4)
        return launch_wg_sel(kind, R, code - 1, in, ker, out, H, W, kh, kw, Ho, Wo, 0);
    return false;
}

// Times the candidates on the real call; every candidate that runs leaves a complete, correct
// output and the round-3 path runs last.
int tune_run(int kind, int R, const float* in, const float* ker, float* out, int H, int W,
             int kh, int kw, int Ho, int Wo) {
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
        return 5;
    }
    int cands[5];
    int nc = 0;
    cands[nc++] = 1;
    const long long T = wg_tiles(kind, Ho, Wo);
    if (T < 3LL * num_sms()) {
        cands[nc++] = 2;
        if (g_wg_split[kind] == 1 && kh >= 4) cands[nc++] = 3;
        if (g_wg_split[kind] == 1 && kh >= 9) cands[nc++] = 4;
    }
    cands[nc++] = 5;
    float best[5];
    bool okc[5];
    for (int i = 0; i < 5; ++i) {
        best[i] = 3.0e38f;
        okc[i] = true;
    }
    for (int rep = 0; rep < 2; ++rep) {
        for (int i = 0; i < nc; ++i) {
            if (!okc[i]) continue;
            cudaEventRecord(e0);
            const bool r = run_choice(cands[i], kind, R, in, ker, out, H, W, kh, kw, Ho, Wo);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms = 0.0f;
            if (!r || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
                cudaGetLastError();
                okc[i] = false;
                continue;
            }
            if (ms < best[i]) best[i] = ms;
        }
    }
    cudaGetLastError();
    int bi = nc - 1;  // round-3 path
    for (int i = 0; i < nc - 1; ++i)
        if (okc[i] && best[i] < best[bi]) bi = i;
    return cands[bi];
}

}  // namespace

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    const int H = input_rows, W = input_cols, kh = kernel_rows, kw = kernel_cols;
    const int Ho = H - kh + 1, Wo = W - kw + 1;
    if (kh > 0 && kw > 0 && H > 0 && W > 0 && Ho > 0 && Wo > 0) {
        bool done = false;
        const int kind = wg_kind(kw);
        if (kind != 0 && wg_tiles(kind, Ho, Wo) >= (long long)num_sms()) {
            if (g_wg_R[kind] == 0) wg_selftest(kind);
            const int R = g_wg_R[kind];
            if (R > 0) {
                int ch = tune_lookup(H, W, kh, kw);
                if (ch == 0) {
                    ch = tune_run(kind, R, input, kernel, output, H, W, kh, kw, Ho, Wo);
                    tune_store(H, W, kh, kw, ch);
                    done = true;  // tune_run leaves a complete result
                } else if (ch >= 1 && ch <= 4) {
                    done = launch_wg_sel(kind, R, ch - 1, input, kernel, output, H, W, kh, kw,
                                         Ho, Wo, 0);
                }
            }
        }
        if (!done) run_old(input, kernel, output, H, W, kh, kw, Ho, Wo);
    }
    cudaDeviceSynchronize();
}
