// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
// Layout: p = (i*ny + j)*nz + k  (k fastest). V = nz/8 vectors (uint4 of 8 bf16) per row.
//
// Paths (fast paths need nz % 8 == 0 and 16-byte aligned pointers):
//  * totalV < 2^19 : full-occupancy C=1 register kernel (unchanged from round3-c2).
//  * 2^19 <= totalV < 2^21 and V in {8,16,32} : per-plane pipelined staged tile (new).
//        Block = C=8 planes (i) x R rows (j) x full rows (V vectors), one thread per (j,kv) column.
//        The (R+2) rows of each of the C+2 planes are contiguous in memory, so each plane is fetched
//        by ONE cp.async.bulk (TMA 1-D) into shared memory, completing on its own mbarrier. All
//        C+2 copies are issued at kernel start; each thread then walks its column down the planes,
//        waiting only for plane i+1 before computing/storing plane i, so compute and stores overlap
//        the remaining reads. Planes i-1, i, i+1 are kept unpacked in fp32 registers (each vector
//        unpacked once along i); k-edges come from warp shuffles (rows align with warps).
//        16.8 MB class: R = 512/V (512 threads); 33.6 MB class: R = 1024/V (1024 threads).
//        ~128 CTAs for every listed shape: a single wave.
//  * 2^19 <= totalV < 2^20, other V: one-shot cp.async staged tile (round3-c2).
//  * otherwise     : round1-c1 rolling-window register kernel (C=2 / C=4).
//  * nz % 8 != 0 or misaligned: generic one-thread-per-element kernel.
// Arithmetic is fp32 in the baseline's order, rounded once (RN) at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstddef>

#define FULL_MASK 0xffffffffu

// Set to 0 to send the 33.6 MB class (2^20 <= totalV < 2^21) back to the rolling kernel.
#ifndef STENCIL_PIPE_BIG
#define STENCIL_PIPE_BIG 1
#endif

#define PIPE_C 8

// ------------------------------------------------------------------------------------------------
// helpers
// ------------------------------------------------------------------------------------------------
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

// Exact bf16 bit pattern of two floats that were produced by unpacking bf16 values.
__device__ __forceinline__ unsigned raw2(float lo, float hi) {
    return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}

__device__ __forceinline__ float lo_f(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// One packed word (2 elements). kml = value of the element before the low one, kpr = value of the
// element after the high one. Term order matches the baseline: im + ip + jp + jm + kp + km - 6c.
__device__ __forceinline__ unsigned word_stencil(unsigned cw, unsigned imw, unsigned ipw,
                                                 unsigned jmw, unsigned jpw, float kml, float kpr,
                                                 float r) {
    const float c0 = lo_f(cw);
    const float c1 = hi_f(cw);
    const float o0 = c0 + r * (lo_f(imw) + lo_f(ipw) + lo_f(jpw) + lo_f(jmw) + c1 + kml - 6.0f * c0);
    const float o1 = c1 + r * (hi_f(imw) + hi_f(ipw) + hi_f(jpw) + hi_f(jmw) + kpr + c0 - 6.0f * c1);
    return pack2(o0, o1);
}

// Eight elements; klbits / krbits are the raw 16-bit patterns of elements k-1 and k+8.
// first / last: element 0 / 7 is a k-boundary and is copied bit for bit.
__device__ __forceinline__ uint4 stencil8(const uint4 c, const uint4 im, const uint4 ip,
                                          const uint4 jm, const uint4 jp, unsigned klbits,
                                          unsigned krbits, float r, bool first, bool last) {
    uint4 o;
    o.x = word_stencil(c.x, im.x, ip.x, jm.x, jp.x, __uint_as_float(klbits << 16), lo_f(c.y), r);
    o.y = word_stencil(c.y, im.y, ip.y, jm.y, jp.y, hi_f(c.x), lo_f(c.z), r);
    o.z = word_stencil(c.z, im.z, ip.z, jm.z, jp.z, hi_f(c.y), lo_f(c.w), r);
    o.w = word_stencil(c.w, im.w, ip.w, jm.w, jp.w, hi_f(c.z), __uint_as_float(krbits << 16), r);
    if (first) o.x = (o.x & 0xffff0000u) | (c.x & 0x0000ffffu);
    if (last) o.w = (o.w & 0x0000ffffu) | (c.w & 0xffff0000u);
    return o;
}

__device__ __forceinline__ void cp_async16(void* sdst, const void* gsrc) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(sdst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gsrc) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// ---- mbarrier / bulk-copy (TMA 1-D) helpers ----
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulk_g2s(unsigned dst, const void* src, unsigned bytes,
                                         unsigned bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
            "r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// ------------------------------------------------------------------------------------------------
// Path A: full-occupancy C=1 register kernel (one thread per vector, whole volume, 32-bit indices).
// ------------------------------------------------------------------------------------------------
template <int BS>
__global__ void __launch_bounds__(BS, 2048 / BS)
stencil_3d_bf16_reg1(uint4* __restrict__ out, const uint4* __restrict__ in,
                     const unsigned short* __restrict__ in16, float r, unsigned nx, unsigned ny,
                     unsigned V, unsigned totalV) {
    const unsigned t = blockIdx.x * (unsigned)BS + threadIdx.x;
    const bool valid = t < totalV;
    const unsigned lane = threadIdx.x & 31u;

    const unsigned row = t / V;
    const unsigned kv = t - row * V;
    const unsigned i = row / ny;
    const unsigned j = row - i * ny;
    const bool inter = valid && (i >= 1u) && (i + 2u <= nx) && (j >= 1u) && (j + 2u <= ny);
    const bool first = (kv == 0u);
    const bool last = (kv == V - 1u);
    const bool needL = (lane == 0u) && !first;   // element k-1 lives in another warp
    const bool needR = (lane == 31u) && !last;   // element k+8 lives in another warp
    const unsigned planeV = ny * V;

    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 c = zero, im = zero, ip = zero, jm = zero, jp = zero;
    unsigned kl = 0u, kr = 0u;

    // Issue every load before any use: one dependent DRAM round trip per thread.
    if (valid) c = __ldg(in + t);
    if (inter) {
        im = __ldg(in + (t - planeV));
        ip = __ldg(in + (t + planeV));
        jm = __ldg(in + (t - V));
        jp = __ldg(in + (t + V));
        if (needL) kl = (unsigned)__ldg(in16 + ((size_t)t * 8 - 1));
        if (needR) kr = (unsigned)__ldg(in16 + ((size_t)t * 8 + 8));
    }

    const unsigned left = __shfl_up_sync(FULL_MASK, c.w, 1);
    const unsigned right = __shfl_down_sync(FULL_MASK, c.x, 1);

    if (valid) {
        uint4 res = c;   // boundary plane / row: bit copy
        if (inter) {
            const unsigned klb = needL ? kl : (left >> 16);
            const unsigned krb = needR ? kr : (right & 0xffffu);
            res = stencil8(c, im, ip, jm, jp, klb, krb, r, first, last);
        }
        __stcs(out + t, res);
    }
}

// ------------------------------------------------------------------------------------------------
// Path P (new): per-plane pipelined staged tile, TMA 1-D bulk copies + one mbarrier per plane.
// Block = C planes x R rows x V vectors; thread tid owns column (jr = tid / V, kv = tid % V).
// Shared memory: (C+2) slots of (R+2) rows x V vectors (slot s <-> plane i0-1+s, row rj <-> j0-1+rj),
// followed by C+2 mbarriers. V in {8,16,32}: V divides 32, so a warp holds whole rows and the
// k-neighbours across vectors are available by shuffle (lane 0 is always kv=0, lane 31 kv=V-1).
// ------------------------------------------------------------------------------------------------
template <int V, int R, int C>
__global__ void __launch_bounds__(R * V, (R * V <= 512) ? 2 : 1)
stencil_3d_bf16_pipe(uint4* __restrict__ out, const uint4* __restrict__ in, float r, int nx,
                     int ny) {
    constexpr int RH = R + 2;
    constexpr int PS = RH * V;   // vectors per shared slot
    extern __shared__ uint4 smem_pipe[];

    const unsigned sbase = smem_u32(smem_pipe);
    const unsigned bar0 = sbase + (unsigned)((C + 2) * PS * 16);
    const int tid = (int)threadIdx.x;
    const int i0 = (int)blockIdx.x * C;
    const int j0 = (int)blockIdx.y * R;

    // ---- issue: lane s of warp 0 fetches slot s (one contiguous bulk copy per plane) ----
    if (tid < C + 2) {
        const unsigned bar = bar0 + (unsigned)tid * 8u;
        mbar_init(bar, 1u);
        fence_mbar_init();
        fence_proxy_async_smem();
        const int i = i0 - 1 + tid;
        if (i >= 0 && i < nx) {
            const int jlo = (j0 > 0) ? (j0 - 1) : 0;
            const int jhi = (j0 + R < ny) ? (j0 + R) : (ny - 1);
            const unsigned bytes = (unsigned)(jhi - jlo + 1) * (unsigned)V * 16u;
            const unsigned dst = sbase + (unsigned)((tid * PS + (jlo - j0 + 1) * V) * 16);
            const uint4* src = in + ((size_t)i * (size_t)ny + (size_t)jlo) * (size_t)V;
            mbar_arrive_expect_tx(bar, bytes);
            bulk_g2s(dst, src, bytes, bar);
        }
    }
    __syncthreads();   // barrier inits visible to every waiter

    // ---- per-thread column walk down the planes ----
    const int jr = tid / V;
    const int kv = tid - jr * V;
    const int j = j0 + jr;
    const bool jok = j < ny;
    const bool jint = (j >= 1) && (j <= ny - 2);
    const bool first = (kv == 0);
    const bool last = (kv == V - 1);
    const uint4* sp = smem_pipe + (tid + V);   // own column, row rj = jr + 1, slot 0
    const size_t planeV = (size_t)ny * (size_t)V;
    uint4* op = out + ((size_t)i0 * (size_t)ny + (size_t)(jok ? j : 0)) * (size_t)V + (size_t)kv;

    float fm[8], cc[8];
    if (i0 > 0) {   // block-uniform
        mbar_wait(bar0, 0u);
        unpack8(sp[0], fm);
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) fm[e] = 0.0f;
    }
    mbar_wait(bar0 + 8u, 0u);
    unpack8(sp[PS], cc);

#pragma unroll
    for (int c = 0; c < C; ++c) {
        const int i = i0 + c;
        if (i >= nx) break;   // block-uniform: shuffles below stay converged
        const bool has_next = (i + 1) < nx;

        float fp[8];
        if (has_next) {   // block-uniform
            mbar_wait(bar0 + (unsigned)(c + 2) * 8u, 0u);
            unpack8(sp[(c + 2) * PS], fp);
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) fp[e] = 0.0f;
        }

        const float lft = __shfl_up_sync(FULL_MASK, cc[7], 1);
        const float rgt = __shfl_down_sync(FULL_MASK, cc[0], 1);

        if (jok) {
            uint4 res;
            if (has_next && (i >= 1) && jint) {
                const uint4 jmv = sp[(c + 1) * PS - V];
                const uint4 jpv = sp[(c + 1) * PS + V];
                float gm[8], gp[8];
                unpack8(jmv, gm);
                unpack8(jpv, gp);
                float o[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float kmv = (e > 0) ? cc[(e + 7) & 7] : lft;
                    const float kpv = (e < 7) ? cc[(e + 1) & 7] : rgt;
                    const float cv = cc[e];
                    o[e] = cv + r * (fm[e] + fp[e] + gp[e] + gm[e] + kpv + kmv - 6.0f * cv);
                }
                res.x = pack2(o[0], o[1]);
                res.y = pack2(o[2], o[3]);
                res.z = pack2(o[4], o[5]);
                res.w = pack2(o[6], o[7]);
                // k-boundary elements: bit copy
                if (first) res.x = __byte_perm(__float_as_uint(cc[0]), res.x, 0x7632);
                if (last) res.w = __byte_perm(res.w, __float_as_uint(cc[7]), 0x7610);
            } else {
                // boundary plane / row: bit copy
                res.x = raw2(cc[0], cc[1]);
                res.y = raw2(cc[2], cc[3]);
                res.z = raw2(cc[4], cc[5]);
                res.w = raw2(cc[6], cc[7]);
            }
            __stcs(op, res);
        }
        op += planeV;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            fm[e] = cc[e];
            cc[e] = fp[e];
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Path B: one-shot staged tile (round3-c2). Block = C planes (i) x R rows (j) x full rows (V).
// Shared memory holds (C+2) x (R+2) x V vectors (halo planes / rows included where they exist).
// Requires V <= BS (host guarantees).
// ------------------------------------------------------------------------------------------------
template <int C, int BS>
__global__ void __launch_bounds__(BS, 4)
stencil_3d_bf16_staged(uint4* __restrict__ out, const uint4* __restrict__ in, float r, int nx,
                       int ny, int V, int R) {
    extern __shared__ uint4 sm[];
    const int RH = R + 2;
    const int i0 = (int)blockIdx.x * C;
    const int j0 = (int)blockIdx.y * R;
    const int tid = (int)threadIdx.x;
    const int rstep = BS / V;   // >= 1
    const int rsub = tid / V;
    const int kv = tid - rsub * V;
    const bool active = rsub < rstep;
    const size_t planeV = (size_t)ny * (size_t)V;

    // ---- fetch: every copy of the block in flight at once ----
    if (active) {
#pragma unroll
        for (int ci = 0; ci < C + 2; ++ci) {
            const int i = i0 - 1 + ci;
            if (i < 0 || i >= nx) continue;
            const uint4* src_plane = in + (size_t)i * planeV + kv;
            uint4* dst_plane = sm + (size_t)ci * RH * V + kv;
            for (int rj = rsub; rj < RH; rj += rstep) {
                const int j = j0 - 1 + rj;
                if (j < 0 || j >= ny) continue;
                cp_async16(dst_plane + rj * V, src_plane + (size_t)j * V);
            }
        }
    }
    cp_async_wait_all();
    __syncthreads();

    // ---- compute from shared memory, store ----
    if (active) {
        const unsigned short* s16 = reinterpret_cast<const unsigned short*>(sm);
        const int planeS = RH * V;
        const bool first = (kv == 0);
        const bool last = (kv == V - 1);
#pragma unroll
        for (int ci = 1; ci <= C; ++ci) {
            const int i = i0 - 1 + ci;
            if (i >= nx) break;
            const bool iint = (i >= 1) && (i <= nx - 2);
            uint4* out_plane = out + (size_t)i * planeV + kv;
            for (int rj = 1 + rsub; rj <= R; rj += rstep) {
                const int j = j0 - 1 + rj;
                if (j >= ny) break;
                const int sidx = (ci * RH + rj) * V + kv;
                const uint4 cur = sm[sidx];
                uint4 res = cur;   // boundary plane / row: bit copy
                if (iint && j >= 1 && j <= ny - 2) {
                    const uint4 im = sm[sidx - planeS];
                    const uint4 ip = sm[sidx + planeS];
                    const uint4 jm = sm[sidx - V];
                    const uint4 jp = sm[sidx + V];
                    const unsigned klb = first ? 0u : (unsigned)s16[sidx * 8 - 1];
                    const unsigned krb = last ? 0u : (unsigned)s16[sidx * 8 + 8];
                    res = stencil8(cur, im, ip, jm, jp, klb, krb, r, first, last);
                }
                __stcs(out_plane + (size_t)j * V, res);
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Path C (round1-c1, unchanged): rolling register window along i, C planes per thread.
// ------------------------------------------------------------------------------------------------
template <int C, int BS>
__global__ void __launch_bounds__(BS, 2048 / BS / 2)
stencil_3d_bf16_fast(uint4* __restrict__ out, const uint4* __restrict__ in,
                     const unsigned short* __restrict__ in16, float r, int nx, int ny, int V,
                     int nchunks) {
    const size_t planeV = (size_t)ny * (size_t)V;
    const size_t t = (size_t)blockIdx.x * BS + threadIdx.x;
    const bool valid = t < planeV;
    const int lane = threadIdx.x & 31;

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

    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

    for (int ch = blockIdx.y; ch < nchunks; ch += gridDim.y) {   // block-uniform
        const int i0 = ch * C;
        size_t pv = (size_t)i0 * planeV + t;
        uint4 prev = zero, cur = zero;
        if (valid) {
            cur = __ldg(in + pv);
            if (i0 > 0) prev = __ldg(in + pv - planeV);
        }
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const int i = i0 + c;
            if (i >= nx) break;   // block-uniform: shuffles below stay converged
            const bool iint = (i >= 1) && (i <= nx - 2);
            const bool inter = valid && iint && jint;

            uint4 nxt = zero;
            if (valid && (i + 1 < nx)) nxt = __ldg(in + pv + planeV);

            uint4 jm = zero, jp = zero;
            unsigned kml = 0u, kpr = 0u;
            if (inter) {
                jm = __ldg(in + pv - (size_t)V);
                jp = __ldg(in + pv + (size_t)V);
                if (need_left_g) kml = (unsigned)__ldg(in16 + (pv * 8 - 1));
                if (need_right_g) kpr = (unsigned)__ldg(in16 + (pv * 8 + 8));
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
                __stcs(out + pv, res);
            }
            prev = cur;
            cur = nxt;
            pv += planeV;
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Generic fallback (any nz / alignment): one thread per element, grid-stride, fused boundary.
// ------------------------------------------------------------------------------------------------
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

// ------------------------------------------------------------------------------------------------
// host launchers
// ------------------------------------------------------------------------------------------------
template <int C, int BS>
static void launch_fast(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                        int V) {
    const size_t planeV = (size_t)ny * (size_t)V;
    const size_t gxs = (planeV + BS - 1) / BS;
    const unsigned gx = (unsigned)gxs;
    const int nchunks = (nx + C - 1) / C;
    const unsigned gy = (unsigned)(nchunks < 65535 ? nchunks : 65535);
    stencil_3d_bf16_fast<C, BS><<<dim3(gx, gy, 1), dim3(BS, 1, 1)>>>(
        reinterpret_cast<uint4*>(u_new), reinterpret_cast<const uint4*>(u_old),
        reinterpret_cast<const unsigned short*>(u_old), r, nx, ny, V, nchunks);
}

template <int BS>
static void launch_reg1(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                        int V, size_t totalV) {
    const unsigned blocks = (unsigned)((totalV + BS - 1) / BS);
    stencil_3d_bf16_reg1<BS><<<blocks, BS>>>(
        reinterpret_cast<uint4*>(u_new), reinterpret_cast<const uint4*>(u_old),
        reinterpret_cast<const unsigned short*>(u_old), r, (unsigned)nx, (unsigned)ny,
        (unsigned)V, (unsigned)totalV);
}

// Returns false when the staged tile does not apply (caller falls back).
static bool launch_staged(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                          int ny, int V) {
    constexpr int C = 4;
    constexpr int BS = 256;
    if (V < 1 || V > 64) return false;            // full rows in smem; V <= BS for the mapping
    int R = BS / V;                                // R * V <= BS: one output row slot per thread
    if (R > ny) R = ny;
    if (R < 1) R = 1;
    const size_t njt = ((size_t)ny + R - 1) / R;
    const size_t nit = ((size_t)nx + C - 1) / C;
    if (njt > 65535 || nit > 0x7fffffffu) return false;
    const size_t smem = (size_t)(C + 2) * (size_t)(R + 2) * (size_t)V * sizeof(uint4);
    if (smem > 48 * 1024) return false;

    static bool attr_done = false;
    if (!attr_done) {
        cudaFuncSetAttribute(stencil_3d_bf16_staged<C, BS>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        attr_done = true;
    }
    stencil_3d_bf16_staged<C, BS><<<dim3((unsigned)nit, (unsigned)njt, 1), dim3(BS, 1, 1), smem>>>(
        reinterpret_cast<uint4*>(u_new), reinterpret_cast<const uint4*>(u_old), r, nx, ny, V, R);
    return true;
}

// Pipelined staged tile. Returns false when it cannot be launched (caller falls back).
template <int V, int R>
static bool launch_pipe(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                        int ny) {
    constexpr int C = PIPE_C;
    constexpr int BS = R * V;
    static_assert(BS <= 1024, "block too large");
    constexpr size_t smem =
        (size_t)(C + 2) * (size_t)(R + 2) * (size_t)V * sizeof(uint4) + (size_t)(C + 2) * 8;
    static_assert(smem <= 227 * 1024, "tile too large for shared memory");

    const size_t njt = ((size_t)ny + R - 1) / R;
    const size_t nit = ((size_t)nx + C - 1) / C;
    if (njt > 65535 || nit > 0x7fffffffu) return false;

    static bool attr_done = false;
    static bool attr_ok = false;
    if (!attr_done) {
        attr_ok = (cudaFuncSetAttribute(stencil_3d_bf16_pipe<V, R, C>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem) == cudaSuccess);
        cudaFuncSetAttribute(stencil_3d_bf16_pipe<V, R, C>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        if (!attr_ok) (void)cudaGetLastError();
        attr_done = true;
    }
    if (!attr_ok) return false;

    stencil_3d_bf16_pipe<V, R, C><<<dim3((unsigned)nit, (unsigned)njt, 1), dim3(BS, 1, 1), smem>>>(
        reinterpret_cast<uint4*>(u_new), reinterpret_cast<const uint4*>(u_old), r, nx, ny);
    return true;
}

// big = false: 16.8 MB class (512 threads / CTA), big = true: 33.6 MB class (1024 threads / CTA).
static bool dispatch_pipe(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                          int ny, int V, bool big) {
    switch (V) {
        case 32:
            return big ? launch_pipe<32, 32>(u_new, u_old, r, nx, ny)
                       : launch_pipe<32, 16>(u_new, u_old, r, nx, ny);
        case 16:
            return big ? launch_pipe<16, 64>(u_new, u_old, r, nx, ny)
                       : launch_pipe<16, 32>(u_new, u_old, r, nx, ny);
        case 8:
            return big ? launch_pipe<8, 128>(u_new, u_old, r, nx, ny)
                       : launch_pipe<8, 64>(u_new, u_old, r, nx, ny);
        default:
            return false;
    }
}

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool aligned =
            ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        if ((nz % 8) == 0 && aligned) {
            const int V = nz / 8;
            const size_t totalV = (size_t)nx * (size_t)ny * (size_t)V;
            const bool pipeV = (V == 8) || (V == 16) || (V == 32);
            if (totalV < ((size_t)1 << 17)) {
                launch_reg1<64>(u_new, u_old, r, nx, ny, V, totalV);
            } else if (totalV < ((size_t)1 << 18)) {
                launch_reg1<128>(u_new, u_old, r, nx, ny, V, totalV);
            } else if (totalV < ((size_t)1 << 19)) {
                launch_reg1<256>(u_new, u_old, r, nx, ny, V, totalV);
            } else if (totalV < ((size_t)1 << 20)) {
                bool done = false;
                if (pipeV) done = dispatch_pipe(u_new, u_old, r, nx, ny, V, false);
                if (!done) done = launch_staged(u_new, u_old, r, nx, ny, V);
                if (!done) launch_fast<2, 256>(u_new, u_old, r, nx, ny, V);
            } else if (totalV < ((size_t)1 << 21)) {
                bool done = false;
#if STENCIL_PIPE_BIG
                if (pipeV) done = dispatch_pipe(u_new, u_old, r, nx, ny, V, true);
#endif
                if (!done) launch_fast<4, 256>(u_new, u_old, r, nx, ny, V);
            } else {
                launch_fast<4, 256>(u_new, u_old, r, nx, ny, V);
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
