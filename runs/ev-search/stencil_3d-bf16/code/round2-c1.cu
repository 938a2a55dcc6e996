// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
// Layout: p = (i*ny + j)*nz + k  (k fastest).
//
// Fast path (nz % 8 == 0, both pointers 16-byte aligned): one fused kernel, each thread owns
// 8 consecutive k-elements (one uint4 of bf16). k-neighbours come from registers and warp
// shuffles, j-neighbours from L1 (same block), i-neighbours from a sliding register window along i
// (C planes per thread, loads issued two planes ahead). Arithmetic is fp32 in the baseline's order,
// rounded once (RN) at the store.
//
// L2 policy (C >= 3): the timed call starts with L2 full of dirty lines, so every line the kernel
// allocates pushes one back to DRAM unless it displaces a clean input line. Input lines that no
// other block reads (chunk-interior planes, rows away from the block's j-edges) are loaded with an
// L2 evict_first policy so they recycle among themselves; lines another block also reads (chunk-edge
// planes i0-1, i0, i0+C-1, i0+C and the block's first/last rows) stay at normal priority. The output
// is stored at normal priority.
// Generic fallback (any other nz / alignment): one thread per element, grid-stride, fused boundary.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstddef>

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

// ---- L2 cache-policy helpers ----------------------------------------------------------------
__device__ __forceinline__ unsigned long long make_policy_evict_first() {
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

__device__ __forceinline__ uint4 ld_v4_hint(const uint4* ptr, unsigned long long pol) {
    uint4 v;
    asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(ptr), "l"(pol));
    return v;
}

__device__ __forceinline__ unsigned ld_u16_hint(const unsigned short* ptr, unsigned long long pol) {
    unsigned short v;
    asm volatile("ld.global.nc.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(ptr), "l"(pol));
    return (unsigned)v;
}

template <bool HINT>
__device__ __forceinline__ uint4 ld_v4(const uint4* ptr, bool ef, unsigned long long pol) {
    if (HINT && ef) return ld_v4_hint(ptr, pol);
    return __ldg(ptr);
}

template <bool HINT>
__device__ __forceinline__ unsigned ld_u16(const unsigned short* ptr, bool ef,
                                           unsigned long long pol) {
    if (HINT && ef) return ld_u16_hint(ptr, pol);
    return (unsigned)__ldg(ptr);
}

// S: width (in uint4) of the bands at the start and end of each block whose lines are also read by
// a neighbouring block (j-halo); they keep normal L2 priority.
template <int C, int BS>
__global__ void __launch_bounds__(BS, 2048 / BS / 2)
stencil_3d_bf16_fast(uint4* __restrict__ out, const uint4* __restrict__ in,
                     const unsigned short* __restrict__ in16, float r, int nx, int ny, int V,
                     int nchunks, int S) {
    constexpr bool HINT = (C >= 3);   // only chunks with interior planes have block-private lines
    const size_t planeV = (size_t)ny * (size_t)V;
    const size_t t = (size_t)blockIdx.x * BS + threadIdx.x;
    const bool valid = t < planeV;
    const int lane = threadIdx.x & 31;
    const int tid = (int)threadIdx.x;

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

    // Which accesses touch only block-private lines (safe to mark evict_first).
    bool own_ef = false, jm_ef = false, jp_ef = false, kl_ef = false, kr_ef = false;
    unsigned long long pol = 0ull;
    if (HINT) {
        const int lo = S, hi = BS - S;   // private element range [lo, hi) within the block
        own_ef = (tid >= lo) && (tid < hi);
        jm_ef = (tid - V >= lo) && (tid - V < hi);
        jp_ef = (tid + V >= lo) && (tid + V < hi);
        kl_ef = (tid - 1 >= lo) && (tid - 1 < hi);
        kr_ef = (tid + 1 >= lo) && (tid + 1 < hi);
        pol = make_policy_evict_first();
    }

    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

    for (int ch = blockIdx.y; ch < nchunks; ch += gridDim.y) {   // block-uniform
        const int i0 = ch * C;
        size_t pv = (size_t)i0 * planeV + t;
        uint4 prev = zero, cur = zero, nxt = zero;
        if (valid) {
            cur = __ldg(in + pv);                                   // plane i0: shared with chunk-1
            if (i0 > 0) prev = __ldg(in + pv - planeV);             // plane i0-1: shared
            if (i0 + 1 < nx)                                        // plane i0+1: interior if C >= 3
                nxt = ld_v4<HINT>(in + pv + planeV, (C >= 3) && own_ef, pol);
        }
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const int i = i0 + c;
            if (i >= nx) break;   // block-uniform: shuffles below stay converged
            const bool iint = (i >= 1) && (i <= nx - 2);
            const bool inter = valid && iint && jint;
            const bool plane_ef = (c >= 1) && (c <= C - 2);   // plane i private to this chunk

            // Prefetch plane i+2 (used as nxt in iteration c+1). Private iff i0+1 <= i+2 <= i0+C-2.
            uint4 nn = zero;
            if (c + 2 <= C) {
                if (valid && (i + 2 < nx))
                    nn = ld_v4<HINT>(in + pv + 2 * planeV, (c + 2 <= C - 2) && own_ef, pol);
            }

            uint4 jm = zero, jp = zero;
            unsigned kml = 0u, kpr = 0u;
            if (inter) {
                jm = ld_v4<HINT>(in + pv - (size_t)V, plane_ef && jm_ef, pol);
                jp = ld_v4<HINT>(in + pv + (size_t)V, plane_ef && jp_ef, pol);
                if (need_left_g) kml = ld_u16<HINT>(in16 + (pv * 8 - 1), plane_ef && kl_ef, pol);
                if (need_right_g) kpr = ld_u16<HINT>(in16 + (pv * 8 + 8), plane_ef && kr_ef, pol);
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
                    unpack8(prev, fm);
                    unpack8(nxt, fp);
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
                if (HINT) {
                    out[pv] = res;          // normal L2 priority: displaces flush lines, not input
                } else {
                    __stcs(out + pv, res);
                }
            }
            prev = cur;
            cur = nxt;
            nxt = nn;
            pv += planeV;
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
    // j-halo band in uint4, rounded up to whole 128-B lines (8 uint4); one extra line of margin
    // when block edges are not line-aligned.
    int S = ((V + 7) / 8) * 8;
    if ((planeV % 8) != 0 || (((uintptr_t)u_old) & (uintptr_t)127) != 0) S += 8;
    stencil_3d_bf16_fast<C, BS><<<dim3(gx, gy, 1), dim3(BS, 1, 1)>>>(
        reinterpret_cast<uint4*>(u_new), reinterpret_cast<const uint4*>(u_old),
        reinterpret_cast<const unsigned short*>(u_old), r, nx, ny, V, nchunks, S);
}

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool aligned =
            ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        if ((nz % 8) == 0 && aligned) {
            const int V = nz / 8;
            const size_t totalV = (size_t)nx * (size_t)ny * (size_t)V;
            if (totalV >= ((size_t)1 << 20)) {
                launch_fast<8, 256>(u_new, u_old, r, nx, ny, V);
            } else if (totalV >= ((size_t)1 << 19)) {
                launch_fast<2, 256>(u_new, u_old, r, nx, ny, V);
            } else if (totalV >= ((size_t)1 << 17)) {
                launch_fast<1, 256>(u_new, u_old, r, nx, ny, V);
            } else {
                launch_fast<1, 128>(u_new, u_old, r, nx, ny, V);
            }
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
