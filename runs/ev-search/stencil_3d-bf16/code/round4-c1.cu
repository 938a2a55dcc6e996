// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
// Layout: p = (i*ny + j)*nz + k  (k fastest). V = nz/8 vectors (uint4 of 8 bf16) per row.
//
// round4-c1 (plan: latency at kernel start - smaller hot code, code warmed while data is in
// flight, loads issued first).
//
// nz in {64,128,256} (V = 8/16/32), 16-byte aligned: V-templated kernels. A warp always holds
// whole rows (V divides 32), so k neighbours come only from shuffles (no k-edge scalar loads),
// index math is shifts/masks (no runtime division: the plane index is blockIdx.y or a loop
// counter), offsets are 32-bit, and neighbour addresses are clamped into the buffer so every
// load is unconditional and issued first.
//  * totalV < 2^18          : reg1t<V,BS,NW=1,WARM>: one thread per vector. All 5 loads, then a
//                             dummy pass of the body on register values (store off), then the
//                             real pass: ONE copy of the body (rolled, one packed word per
//                             iteration with register rotation), whose code lines are fetched
//                             during the DRAM round trip. 64-register budget (one wave anyway).
//  * 2^18 <= totalV < 2^19  : reg1t<V,256,NW=4,no warm> at 32 registers / 2048 threads per SM.
//  * 2^19 <= totalV < 2^20  : stagedt<V,4,256,WARM>: cp.async tile into shared memory; the
//                             C-plane loop is rolled and starts with a dummy step (before the
//                             cp.async wait) that runs the body on not-yet-valid shared memory.
//  * otherwise              : rollt<V,4,256>: rolling register window along i, C-loop rolled.
// Any other nz % 8 == 0 (aligned): the round3-c2 runtime-V kernels, unchanged.
// nz % 8 != 0 or misaligned: generic one-thread-per-element kernel.
// Arithmetic is fp32 in the baseline's order, rounded once (RN) at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstddef>

#define FULL_MASK 0xffffffffu
// Dummy-pass results are "stored" only if their xor equals this (practically never). The
// condition keeps the compiler from moving the body out of the pass loop; if it ever fires, the
// thread writes its own cell, which the real pass overwrites afterwards (same thread, same
// address, program order), so the result is always correct.
#define DUMMY_MAGIC 0x6A09E667u

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

// The 4 packed words of one vector, NW words per loop iteration.
//  NW >= 4 : fully inlined (4 word_stencil copies).
//  NW = 1/2: '#pragma unroll 1' loop with register rotation (x <- y <- z <- w <- right), one
//            (or two) copies of word_stencil in the code.
// a = i-1, b = i+1, m = j-1, q = j+1 neighbours; left = previous vector's last word (its high
// half is element k-1), right = next vector's first word (its low half is element k+8).
// No boundary fix-ups here.
template <int NW>
__device__ __forceinline__ uint4 words(const uint4 c, const uint4 a, const uint4 b,
                                       const uint4 m, const uint4 q, const unsigned left,
                                       const unsigned right, const float r) {
    if (NW >= 4) {
        uint4 o;
        o.x = word_stencil(c.x, a.x, b.x, m.x, q.x, hi_f(left), lo_f(c.y), r);
        o.y = word_stencil(c.y, a.y, b.y, m.y, q.y, hi_f(c.x), lo_f(c.z), r);
        o.z = word_stencil(c.z, a.z, b.z, m.z, q.z, hi_f(c.y), lo_f(c.w), r);
        o.w = word_stencil(c.w, a.w, b.w, m.w, q.w, hi_f(c.z), lo_f(right), r);
        return o;
    } else {
        constexpr int S = (NW < 1) ? 1 : ((NW > 4) ? 4 : NW);
        unsigned cw[5] = {c.x, c.y, c.z, c.w, right};
        unsigned aw[4] = {a.x, a.y, a.z, a.w};
        unsigned bw[4] = {b.x, b.y, b.z, b.w};
        unsigned mw[4] = {m.x, m.y, m.z, m.w};
        unsigned qw[4] = {q.x, q.y, q.z, q.w};
        unsigned o[4] = {0u, 0u, 0u, 0u};
        float kml = hi_f(left);
#pragma unroll 1
        for (int s = 0; s < 4; s += S) {
            unsigned nw[S];
#pragma unroll
            for (int e = 0; e < S; ++e) {
                nw[e] = word_stencil(cw[e], aw[e], bw[e], mw[e], qw[e], kml, lo_f(cw[e + 1]), r);
                kml = hi_f(cw[e]);
            }
#pragma unroll
            for (int k = 0; k + S <= 4; ++k) cw[k] = cw[k + S];
#pragma unroll
            for (int k = 0; k + S < 4; ++k) {
                aw[k] = aw[k + S];
                bw[k] = bw[k + S];
                mw[k] = mw[k + S];
                qw[k] = qw[k + S];
                o[k] = o[k + S];
            }
#pragma unroll
            for (int e = 0; e < S; ++e) o[4 - S + e] = nw[e];
        }
        return make_uint4(o[0], o[1], o[2], o[3]);
    }
}

__device__ __forceinline__ void cp_async16(void* sdst, const void* gsrc) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(sdst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gsrc) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// ================================================================================================
// V-templated kernels (V in {8,16,32}: V divides 32, so every warp holds whole rows)
// ================================================================================================

// ------------------------------------------------------------------------------------------------
// reg1t: one thread per vector. grid = (ceil(planeV/BS), nx); plane i = blockIdx.y.
// WARM: loads first, then a dummy pass on register values, then the real pass (one body copy).
// npass must be >= 2 when WARM (host passes 2); it is a parameter so the compiler cannot unroll
// or peel the pass loop.
// ------------------------------------------------------------------------------------------------
template <int V, int BS, int NW, bool WARM>
__global__ void __launch_bounds__(BS, (WARM ? 1024 : 2048) / BS)
stencil_3d_bf16_reg1t(uint4* __restrict__ out, const uint4* __restrict__ in, float r,
                      unsigned nx, unsigned ny, unsigned planeV, int npass) {
    // ---- addresses (clamped into the buffer) and all loads first ----
    const unsigned i = blockIdx.y;
    const unsigned p = blockIdx.x * (unsigned)BS + threadIdx.x;
    const unsigned pc = min(p, planeV - 1u);
    const unsigned t = i * planeV + pc;
    const unsigned tim = (i != 0u) ? (t - planeV) : t;
    const unsigned tip = (i + 1u < nx) ? (t + planeV) : t;
    const unsigned tjm = (pc >= (unsigned)V) ? (t - (unsigned)V) : t;
    const unsigned tjp = (pc + (unsigned)V < planeV) ? (t + (unsigned)V) : t;
    const uint4 lc = __ldg(in + t);
    const uint4 la = __ldg(in + tim);
    const uint4 lb = __ldg(in + tip);
    const uint4 lm = __ldg(in + tjm);
    const uint4 lq = __ldg(in + tjp);

    // ---- predicates (shifts / masks only) ----
    const bool valid = p < planeV;
    const unsigned j = pc / (unsigned)V;
    const unsigned kv = pc % (unsigned)V;
    const bool inter = (i >= 1u) && (i + 2u <= nx) && (j >= 1u) && (j + 2u <= ny);
    const bool first = (kv == 0u);
    const bool last = (kv == (unsigned)V - 1u);

    uint4 c, a, b, m, q;
    int pass;
    if (WARM) {
        // dummy register data: no memory dependence, so pass 0 runs while the loads fly
        const unsigned d = (threadIdx.x * 0x9E3779B9u) ^ __float_as_uint(r);
        c = make_uint4(d, d ^ 0x3F803F80u, d + 0x00010001u, ~d);
        a = c;
        b = c;
        m = c;
        q = c;
        pass = (npass > 2) ? (npass - 1) : 1;
    } else {
        c = lc;
        a = la;
        b = lb;
        m = lm;
        q = lq;
        pass = 0;
    }

#pragma unroll 1
    for (;;) {
        const unsigned left = __shfl_up_sync(FULL_MASK, c.w, 1);
        const unsigned right = __shfl_down_sync(FULL_MASK, c.x, 1);
        uint4 res = words<NW>(c, a, b, m, q, left, right, r);
        if (first) res.x = (res.x & 0xffff0000u) | (c.x & 0x0000ffffu);
        if (last) res.w = (res.w & 0x0000ffffu) | (c.w & 0xffff0000u);
        if (!inter) res = c;   // boundary plane / row: bit copy
        const bool st =
            valid && ((pass <= 0) || ((res.x ^ res.y ^ res.z ^ res.w) == DUMMY_MAGIC));
        if (st) __stcs(out + t, res);
        if (pass <= 0) break;
        --pass;
        c = lc;   // end of the dummy pass: switch to the loaded data
        a = la;
        b = lb;
        m = lm;
        q = lq;
    }
}

// ------------------------------------------------------------------------------------------------
// stagedt: one-shot staged tile. Block = C planes (i) x R = BS/V rows (j) x full rows.
// Shared memory holds (C+2) x (R+2) x V vectors. Thread tid: row slot rsub = tid/V, kv = tid%V.
// WARM: the rolled C-plane loop starts with a dummy step (plane slot 1, store off) that runs
// before the cp.async wait, on shared memory that is not yet valid.
// ------------------------------------------------------------------------------------------------
template <int V, int C, int BS, bool WARM>
__global__ void __launch_bounds__(BS, 4)
stencil_3d_bf16_stagedt(uint4* __restrict__ out, const uint4* __restrict__ in, float r, int nx,
                        int ny, unsigned planeV) {
    constexpr int R = BS / V;
    constexpr int RH = R + 2;
    constexpr int PS = RH * V;   // vectors per shared plane
    __shared__ uint4 sm[(C + 2) * PS];

    const int tid = (int)threadIdx.x;
    const int rsub = tid / V;   // 0 .. R-1
    const int kv = tid % V;
    const int i0 = (int)blockIdx.x * C;
    const int j0 = (int)blockIdx.y * R;

    // ---- fetch: row slots rsub (all threads) and rsub + R (rsub < 2), planes i0-1 .. i0+C ----
    {
        const int jA = j0 - 1 + rsub;
        const int jB = jA + R;   // >= R - 1 >= 0
        const bool okA = (jA >= 0) && (jA < ny);
        const bool okB = (rsub < 2) && (jB < ny);
        const unsigned gA = (unsigned)(okA ? jA : 0) * (unsigned)V + (unsigned)kv;
        const unsigned gB = (unsigned)(okB ? jB : 0) * (unsigned)V + (unsigned)kv;
        uint4* dA = sm + rsub * V + kv;
#pragma unroll 1
        for (int ci = 0; ci < C + 2; ++ci) {
            const int i = i0 - 1 + ci;
            if (i >= 0 && i < nx) {
                const unsigned pb = (unsigned)i * planeV;
                if (okA) cp_async16(dA + ci * PS, in + (pb + gA));
                if (okB) cp_async16(dA + ci * PS + R * V, in + (pb + gB));
            }
        }
    }
    if (!WARM) {
        cp_async_wait_all();
        __syncthreads();
    }

    // ---- compute from shared memory, store ----
    const unsigned short* s16 = reinterpret_cast<const unsigned short*>(sm);
    const int rj = rsub + 1;
    const int j = j0 + rsub;
    const bool jok = j < ny;
    const bool jint = (j >= 1) && (j + 2 <= ny);
    const bool first = (kv == 0);
    const bool last = (kv == V - 1);
    int nsteps = nx - i0;
    if (nsteps > C) nsteps = C;
    const unsigned gout = (unsigned)i0 * planeV + (unsigned)j * (unsigned)V + (unsigned)kv;

#pragma unroll 1
    for (int step = (WARM ? -1 : 0); step < nsteps; ++step) {
        const int s = (step < 0) ? 0 : step;
        const int i = i0 + s;
        const int sidx = ((s + 1) * RH + rj) * V + kv;
        const uint4 cur = sm[sidx];
        const uint4 im = sm[sidx - PS];
        const uint4 ip = sm[sidx + PS];
        const uint4 jm = sm[sidx - V];
        const uint4 jp = sm[sidx + V];
        const unsigned klb = (unsigned)s16[sidx * 8 - 1];   // in bounds; ignored when first
        const unsigned krb = (unsigned)s16[sidx * 8 + 8];   // in bounds; ignored when last
        uint4 res = stencil8(cur, im, ip, jm, jp, klb, krb, r, first, last);
        const bool inter = jint && (i >= 1) && (i + 2 <= nx);
        if (!inter) res = cur;   // boundary plane / row: bit copy
        const bool st =
            jok && ((step >= 0) || ((res.x ^ res.y ^ res.z ^ res.w) == DUMMY_MAGIC));
        if (st) __stcs(out + (gout + (unsigned)s * planeV), res);
        if (WARM && step < 0) {
            cp_async_wait_all();
            __syncthreads();
        }
    }
}

// ------------------------------------------------------------------------------------------------
// rollt: rolling register window along i, C planes per thread, C-loop rolled.
// grid = (ceil(planeV/BS), min(nchunks, 65535)).
// ------------------------------------------------------------------------------------------------
template <int V, int C, int BS>
__global__ void __launch_bounds__(BS, 2048 / BS / 2)
stencil_3d_bf16_rollt(uint4* __restrict__ out, const uint4* __restrict__ in, float r, int nx,
                      int ny, unsigned planeV, int nchunks) {
    const unsigned p = blockIdx.x * (unsigned)BS + threadIdx.x;
    const unsigned pc = min(p, planeV - 1u);
    const bool valid = p < planeV;
    const unsigned offm = (pc >= (unsigned)V) ? (unsigned)V : 0u;
    const unsigned offp = (pc + (unsigned)V < planeV) ? (unsigned)V : 0u;
    const int j = (int)(pc / (unsigned)V);
    const unsigned kv = pc % (unsigned)V;
    const bool jint = (j >= 1) && (j + 2 <= ny);
    const bool first = (kv == 0u);
    const bool last = (kv == (unsigned)V - 1u);

    for (int ch = (int)blockIdx.y; ch < nchunks; ch += (int)gridDim.y) {   // block-uniform
        const int i0 = ch * C;
        const int iend = (i0 + C < nx) ? (i0 + C) : nx;
        unsigned pv = (unsigned)i0 * planeV + pc;
        uint4 cur = __ldg(in + pv);
        uint4 prev = __ldg(in + ((i0 > 0) ? (pv - planeV) : pv));
#pragma unroll 1
        for (int i = i0; i < iend; ++i) {   // block-uniform: shuffles stay converged
            const uint4 nxt = __ldg(in + ((i + 1 < nx) ? (pv + planeV) : pv));
            const uint4 jm = __ldg(in + (pv - offm));
            const uint4 jp = __ldg(in + (pv + offp));
            const unsigned left = __shfl_up_sync(FULL_MASK, cur.w, 1);
            const unsigned right = __shfl_down_sync(FULL_MASK, cur.x, 1);
            uint4 res = stencil8(cur, prev, nxt, jm, jp, left >> 16, right & 0xffffu, r, first,
                                 last);
            const bool inter = jint && (i >= 1) && (i + 2 <= nx);
            if (!inter) res = cur;   // boundary plane / row: bit copy
            if (valid) __stcs(out + pv, res);
            prev = cur;
            cur = nxt;
            pv += planeV;
        }
    }
}

// ================================================================================================
// round3-c2 runtime-V kernels (used for nz % 8 == 0 with V not in {8,16,32}), unchanged
// ================================================================================================

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
// Path B: one-shot staged tile. Block = C planes (i) x R rows (j) x full rows (V vectors).
// Requires V <= BS (host guarantees).
// ------------------------------------------------------------------------------------------------
template <int C, int BS>
__global__ void __launch_bounds__(BS, 4)
stencil_3d_bf16_staged(uint4* __restrict__ out, const uint4* __restrict__ in, float r, int nx,
                       int ny, int V, int R) {
    extern __shared__ uint4 sm_dyn[];
    uint4* sm = sm_dyn;
    const int RH = R + 2;
    const int i0 = (int)blockIdx.x * C;
    const int j0 = (int)blockIdx.y * R;
    const int tid = (int)threadIdx.x;
    const int rstep = BS / V;   // >= 1
    const int rsub = tid / V;
    const int kv = tid - rsub * V;
    const bool active = rsub < rstep;
    const size_t planeV = (size_t)ny * (size_t)V;

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
// Path C (round1-c1): rolling register window along i, C planes per thread.
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
    const bool first = (kv == 0);
    const bool last = (kv == V - 1);
    const bool need_left_g = (lane == 0) && !first;
    const bool need_right_g = (lane == 31) && !last;

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

// V-templated paths (V in {8,16,32}); caller guarantees totalV < 2^31.
template <int V>
static void launch_tmpl(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                        size_t totalV) {
    uint4* out = reinterpret_cast<uint4*>(u_new);
    const uint4* in = reinterpret_cast<const uint4*>(u_old);
    const unsigned planeV = (unsigned)ny * (unsigned)V;
    const unsigned unx = (unsigned)nx;
    const unsigned uny = (unsigned)ny;
    const bool nx_ok = nx <= 65535;   // grid y = nx for reg1t

    if (nx_ok && totalV < ((size_t)1 << 17)) {
        constexpr int BS = 64;
        stencil_3d_bf16_reg1t<V, BS, 1, true>
            <<<dim3((planeV + BS - 1) / BS, unx, 1), dim3(BS, 1, 1)>>>(out, in, r, unx, uny,
                                                                        planeV, 2);
        return;
    }
    if (nx_ok && totalV < ((size_t)1 << 18)) {
        constexpr int BS = 128;
        stencil_3d_bf16_reg1t<V, BS, 1, true>
            <<<dim3((planeV + BS - 1) / BS, unx, 1), dim3(BS, 1, 1)>>>(out, in, r, unx, uny,
                                                                        planeV, 2);
        return;
    }
    if (nx_ok && totalV < ((size_t)1 << 19)) {
        constexpr int BS = 256;
        stencil_3d_bf16_reg1t<V, BS, 4, false>
            <<<dim3((planeV + BS - 1) / BS, unx, 1), dim3(BS, 1, 1)>>>(out, in, r, unx, uny,
                                                                        planeV, 1);
        return;
    }
    if (totalV < ((size_t)1 << 20)) {
        constexpr int C = 4;
        constexpr int BS = 256;
        constexpr int R = BS / V;
        const unsigned njt = (unsigned)((ny + R - 1) / R);
        const unsigned nit = (unsigned)((nx + C - 1) / C);
        if (njt <= 65535u) {
            static bool attr_done = false;
            if (!attr_done) {
                cudaFuncSetAttribute(stencil_3d_bf16_stagedt<V, C, BS, true>,
                                     cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared);
                attr_done = true;
            }
            stencil_3d_bf16_stagedt<V, C, BS, true>
                <<<dim3(nit, njt, 1), dim3(BS, 1, 1)>>>(out, in, r, nx, ny, planeV);
            return;
        }
    }
    {
        constexpr int C = 4;
        constexpr int BS = 256;
        const int nchunks = (nx + C - 1) / C;
        const unsigned gy = (unsigned)(nchunks < 65535 ? nchunks : 65535);
        stencil_3d_bf16_rollt<V, C, BS>
            <<<dim3((planeV + BS - 1) / BS, gy, 1), dim3(BS, 1, 1)>>>(out, in, r, nx, ny, planeV,
                                                                       nchunks);
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
    if (V < 1 || V > 64) return false;
    int R = BS / V;
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

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool aligned =
            ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        if ((nz % 8) == 0 && aligned) {
            const int V = nz / 8;
            const size_t totalV = (size_t)nx * (size_t)ny * (size_t)V;
            bool done = false;
            if (totalV < ((size_t)1 << 31)) {
                if (V == 8) {
                    launch_tmpl<8>(u_new, u_old, r, nx, ny, totalV);
                    done = true;
                } else if (V == 16) {
                    launch_tmpl<16>(u_new, u_old, r, nx, ny, totalV);
                    done = true;
                } else if (V == 32) {
                    launch_tmpl<32>(u_new, u_old, r, nx, ny, totalV);
                    done = true;
                }
            }
            if (!done) {
                if (totalV < ((size_t)1 << 17)) {
                    launch_reg1<64>(u_new, u_old, r, nx, ny, V, totalV);
                } else if (totalV < ((size_t)1 << 18)) {
                    launch_reg1<128>(u_new, u_old, r, nx, ny, V, totalV);
                } else if (totalV < ((size_t)1 << 19)) {
                    launch_reg1<256>(u_new, u_old, r, nx, ny, V, totalV);
                } else if (totalV < ((size_t)1 << 20)) {
                    if (!launch_staged(u_new, u_old, r, nx, ny, V))
                        launch_fast<2, 256>(u_new, u_old, r, nx, ny, V);
                } else {
                    launch_fast<4, 256>(u_new, u_old, r, nx, ny, V);
                }
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
