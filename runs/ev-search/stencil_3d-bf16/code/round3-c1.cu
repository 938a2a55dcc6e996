// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
// Layout: p = (i*ny + j)*nz + k  (k fastest).
//
// Fast path (nz % 8 == 0, both pointers 16-byte aligned): one fused kernel, each thread owns
// 8 consecutive k-elements (one uint4 of bf16). k-neighbours come from registers and warp
// shuffles, j-neighbours from L1 (same block), i-neighbours from a sliding register window along i
// (C planes per block). Arithmetic is fp32 in the baseline's order, rounded once (RN) at the store.
//
// L2 policy (round 3):
//  * output: plain st.global.v4 (normal priority) -- no evict-first on the output.
//  * input: a load carries L2::evict_first only on the LAST use of its line: planes strictly
//    inside the block's i-chunk, rows whose j-neighbours are all inside the block. Chunk-boundary
//    planes, tile edge rows and all loads of other blocks' rows keep normal priority.
//  * odd chunks march in -i direction, so neighbouring chunks read their shared planes at about the
//    same time; the end-of-chunk halo read (the second read of that plane) is also evict_first.
// Generic fallback (any other nz / alignment): one thread per element, grid-stride, fused boundary.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstddef>

#ifndef STENCIL_L2_HINTS
#define STENCIL_L2_HINTS 1   // 0: no cache hints at all (plain __ldg everywhere)
#endif
#ifndef STENCIL_ALT
#define STENCIL_ALT 1        // 1: odd chunks march backwards along i
#endif
#ifndef STENCIL_HALO_EF
#define STENCIL_HALO_EF 1    // 1: end-of-chunk halo plane read is evict_first (only with ALT)
#endif
#ifndef STENCIL_WIDE
#define STENCIL_WIDE 1       // 1: 512-thread blocks, C=8 / C=4 for the large classes
#endif

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ void unpack8(const uint4 v, float f[8]) {
    f[0] = __uint_as_float(v.x << 16);
    f[1] = __uint_as_float(v.x & 0xffff0000u);
    f[2] = __uint_as_float(v.y << 16);
    f[3] = __uint_as_float(v.y & 0xffff0000u);
    f[4] = __uint_as_float(v.z << 16);
    f[5] = __uint_as_float(v.z & 0xffff0000u);
    f[6] = __uint_as_float(v.w << 16);
    f[7] = __uint_as_float(v.w & 0xffff0000u);
}

__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x = lo (low 16 bits), .y = hi
    return *reinterpret_cast<const unsigned*>(&h);
}

__device__ __forceinline__ uint64_t make_policy_evict_first() {
    uint64_t pol = 0;
#if STENCIL_L2_HINTS
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

// Read-only 16-byte load; with ef, the L2 line is demoted to evict_first (L1 allocation unchanged).
__device__ __forceinline__ uint4 ld_v4(const uint4* p, bool ef, uint64_t pol) {
#if STENCIL_L2_HINTS
    if (ef) {
        uint4 v;
        asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p), "l"(pol));
        return v;
    }
#else
    (void)ef;
    (void)pol;
#endif
    return __ldg(p);
}

__device__ __forceinline__ unsigned ld_u16(const unsigned short* p, bool ef, uint64_t pol) {
#if STENCIL_L2_HINTS
    if (ef) {
        unsigned short v;
        asm volatile("ld.global.nc.L2::cache_hint.u16 %0, [%1], %2;"
                     : "=h"(v)
                     : "l"(p), "l"(pol));
        return (unsigned)v;
    }
#else
    (void)ef;
    (void)pol;
#endif
    return (unsigned)__ldg(p);
}

template <int C, int BS, bool ALT>
__global__ void __launch_bounds__(BS, 2048 / BS / 2)
stencil_3d_bf16_fast(uint4* __restrict__ out, const uint4* __restrict__ in,
                     const unsigned short* __restrict__ in16, float r, int nx, int ny, int V,
                     int nchunks) {
    const size_t planeV = (size_t)ny * (size_t)V;
    const int lt = (int)threadIdx.x;
    const size_t t = (size_t)blockIdx.x * BS + (size_t)lt;
    const bool valid = t < planeV;
    const int lane = lt & 31;

    int j = 0, kv = 0;
    if (valid) {
        if (planeV <= (size_t)0xffffffffu) {
            unsigned tt = (unsigned)t;
            unsigned jj = tt / (unsigned)V;
            j = (int)jj;
            kv = (int)(tt - jj * (unsigned)V);
        } else {
            size_t jj = t / (size_t)V;
            j = (int)jj;
            kv = (int)(t - jj * (size_t)V);
        }
    }
    const bool jint = (j >= 1) && (j <= ny - 2);
    const bool first = (kv == 0);       // element 0 is k = 0 (boundary)
    const bool last = (kv == V - 1);    // element 7 is k = nz-1 (boundary)
    const bool need_left_g = (lane == 0) && !first;    // km of element 0 not in this warp
    const bool need_right_g = (lane == 31) && !last;   // kp of element 7 not in this warp

    // Row ownership inside the block's tile (local index lt, row stride V): the uint4 at local
    // index q is read only by this block (centre + its two j-neighbours) iff V <= q < BS - V.
    const bool own_c = (lt >= V) && (lt + V < BS);          // q = lt
    const bool own_jm = (lt >= 2 * V);                       // q = lt - V
    const bool own_jp = (lt + 2 * V < BS);                   // q = lt + V
    const bool own_km = (lt - 1 >= V) && (lt - 1 + V < BS);  // q = lt - 1
    const bool own_kp = (lt + 1 >= V) && (lt + 1 + V < BS);  // q = lt + 1

    const uint64_t pol_ef = make_policy_evict_first();
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

    for (int ch = blockIdx.y; ch < nchunks; ch += gridDim.y) {   // block-uniform
        const int i0 = ch * C;
        const int cnt = (nx - i0 < C) ? (nx - i0) : C;          // planes owned by this chunk
        const bool rev = ALT && ((ch & 1) != 0);                 // block-uniform
        const int step = rev ? -1 : 1;
        const int istart = rev ? (i0 + cnt - 1) : i0;
        size_t pv = (size_t)istart * planeV + t;

        uint4 behind = zero, cur = zero;
        if (valid) {
            cur = __ldg(in + pv);                                // chunk-boundary plane: normal
            const int ib = istart - step;
            if (ib >= 0 && ib < nx) behind = __ldg(in + (rev ? (pv + planeV) : (pv - planeV)));
        }
#pragma unroll
        for (int c = 0; c < C; ++c) {
            if (c >= cnt) break;   // block-uniform: shuffles below stay converged
            const int i = istart + c * step;
            const int ia = i + step;                             // plane loaded this iteration
            const size_t pva = rev ? (pv - planeV) : (pv + planeV);
            const bool iint = (i >= 1) && (i <= nx - 2);
            const bool inter = valid && iint && jint;
            const bool pl_own = (i > i0) && (i < i0 + C - 1);    // plane i: only this chunk reads it
            const bool pa_own = (ia > i0) && (ia < i0 + C - 1);
            const bool pa_halo = ALT && (STENCIL_HALO_EF != 0) && ((ia < i0) || (ia >= i0 + cnt));

            uint4 ahead = zero;
            if (valid && (ia >= 0) && (ia < nx))
                ahead = ld_v4(in + pva, own_c && (pa_own || pa_halo), pol_ef);

            uint4 jm = zero, jp = zero;
            unsigned kml = 0u, kpr = 0u;
            if (inter) {
                jm = ld_v4(in + (pv - (size_t)V), pl_own && own_jm, pol_ef);
                jp = ld_v4(in + (pv + (size_t)V), pl_own && own_jp, pol_ef);
                if (need_left_g) kml = ld_u16(in16 + (pv * 8 - 1), pl_own && own_km, pol_ef);
                if (need_right_g) kpr = ld_u16(in16 + (pv * 8 + 8), pl_own && own_kp, pol_ef);
            }

            const unsigned left = __shfl_up_sync(FULL_MASK, cur.w, 1);
            const unsigned right = __shfl_down_sync(FULL_MASK, cur.x, 1);

            if (valid) {
                uint4 res;
                if (!inter) {
                    res = cur;   // boundary plane / row: bit copy
                } else {
                    const unsigned kmbits = need_left_g ? kml : (left >> 16);
                    const unsigned kpbits = need_right_g ? kpr : (right & 0xffffu);
                    float cc[8], fm[8], fp[8], gm[8], gp[8];
                    unpack8(cur, cc);
                    unpack8(behind, fm);   // fm + fp is commutative: same bits in either direction
                    unpack8(ahead, fp);
                    unpack8(jm, gm);
                    unpack8(jp, gp);
                    const float kl = __uint_as_float(kmbits << 16);
                    const float kr = __uint_as_float(kpbits << 16);
                    float o[8];
#pragma unroll
                    for (int e = 0; e < 8; ++e) {
                        const float kmv = (e > 0) ? cc[(e + 7) & 7] : kl;
                        const float kpv = (e < 7) ? cc[(e + 1) & 7] : kr;
                        const float cv = cc[e];
                        o[e] = cv + r * (fm[e] + fp[e] + gp[e] + gm[e] + kpv + kmv - 6.0f * cv);
                    }
                    res.x = pack2(o[0], o[1]);
                    res.y = pack2(o[2], o[3]);
                    res.z = pack2(o[4], o[5]);
                    res.w = pack2(o[6], o[7]);
                    if (first) res.x = (res.x & 0xffff0000u) | (cur.x & 0x0000ffffu);
                    if (last) res.w = (res.w & 0x0000ffffu) | (cur.w & 0xffff0000u);
                }
                out[pv] = res;   // plain st.global.v4 (normal L2 priority)
            }
            behind = cur;
            cur = ahead;
            pv = pva;
        }
    }
}

__global__ void __launch_bounds__(256)
stencil_3d_bf16_generic(__nv_bfloat16* __restrict__ u_new, const __nv_bfloat16* __restrict__ u_old,
                        float r, int nx, int ny, int nz, size_t total) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t sj = (size_t)nz, si = (size_t)ny * (size_t)nz;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += stride) {
        const size_t k = p % (size_t)nz;
        const size_t rest = p / (size_t)nz;
        const size_t j = rest % (size_t)ny;
        const size_t i = rest / (size_t)ny;
        const bool inter = (i >= 1) && (i + 2 <= (size_t)nx) && (j >= 1) && (j + 2 <= (size_t)ny) &&
                           (k >= 1) && (k + 2 <= (size_t)nz);
        if (!inter) {
            u_new[p] = u_old[p];
        } else {
            const float c = __bfloat162float(u_old[p]);
            const float im = __bfloat162float(u_old[p - si]), ip = __bfloat162float(u_old[p + si]);
            const float jp = __bfloat162float(u_old[p + sj]), jm = __bfloat162float(u_old[p - sj]);
            const float kp = __bfloat162float(u_old[p + 1]), km = __bfloat162float(u_old[p - 1]);
            u_new[p] = __float2bfloat16(c + r * (im + ip + jp + jm + kp + km - 6.0f * c));
        }
    }
}

template <int C, int BS>
static void launch_fast(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                        int V) {
    const size_t planeV = (size_t)ny * (size_t)V;
    const size_t gxs = (planeV + BS - 1) / BS;
    const unsigned gx = (unsigned)gxs;
    const int nchunks = (nx + C - 1) / C;
    const unsigned gy = (unsigned)(nchunks < 65535 ? nchunks : 65535);
    stencil_3d_bf16_fast<C, BS, (STENCIL_ALT != 0)><<<dim3(gx, gy, 1), dim3(BS, 1, 1)>>>(
        reinterpret_cast<uint4*>(u_new), reinterpret_cast<const uint4*>(u_old),
        reinterpret_cast<const unsigned short*>(u_old), r, nx, ny, V, nchunks);
}

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool aligned =
            ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        if ((nz % 8) == 0 && aligned) {
            const int V = nz / 8;
            const size_t totalV = (size_t)nx * (size_t)ny * (size_t)V;
#if STENCIL_WIDE
            if (totalV >= ((size_t)1 << 20)) {
                launch_fast<8, 512>(u_new, u_old, r, nx, ny, V);   // 33.6 / 67 MB classes
            } else if (totalV >= ((size_t)1 << 19)) {
                launch_fast<4, 512>(u_new, u_old, r, nx, ny, V);   // 16.8 MB class (~1 wave)
            } else if (totalV >= ((size_t)1 << 17)) {
                launch_fast<1, 256>(u_new, u_old, r, nx, ny, V);
            } else {
                launch_fast<1, 128>(u_new, u_old, r, nx, ny, V);
            }
#else
            if (totalV >= ((size_t)1 << 20)) {
                launch_fast<4, 256>(u_new, u_old, r, nx, ny, V);
            } else if (totalV >= ((size_t)1 << 19)) {
                launch_fast<2, 256>(u_new, u_old, r, nx, ny, V);
            } else if (totalV >= ((size_t)1 << 17)) {
                launch_fast<1, 256>(u_new, u_old, r, nx, ny, V);
            } else {
                launch_fast<1, 128>(u_new, u_old, r, nx, ny, V);
            }
#endif
        } else {
            const size_t total = (size_t)nx * (size_t)ny * (size_t)nz;
            size_t blocks = (total + 255) / 256;
            if (blocks > ((size_t)1 << 20)) blocks = (size_t)1 << 20;
            if (blocks < 1) blocks = 1;
            stencil_3d_bf16_generic<<<(unsigned)blocks, 256>>>(u_new, u_old, r, nx, ny, nz, total);
        }
    }
    cudaDeviceSynchronize();
}
