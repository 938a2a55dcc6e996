// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
//
// Main fast path (nz % 8 == 0, nz <= 256, both pointers 16-byte aligned):
//   * a block covers BY = 256/nzc whole k rows (nzc = nz/8 chunks of 16 B per row) of one i plane,
//     so the slab of rows j0-1 .. j0+BY of a plane is ONE contiguous range of global memory;
//   * the slabs of planes i0-1 .. i1+1 are streamed into a shared-memory ring of ST3_STAGES stages
//     by 1-D bulk async copies (cp.async.bulk + mbarrier complete_tx), issued by one thread;
//   * each thread owns one 16 B chunk (8 consecutive k cells); the centre column (i-1, i, i+1)
//     rotates in registers, the j+-1 rows come from shared memory, the k halo halfwords come from
//     the neighbouring lane by shuffle (shared memory at warp edges);
//   * even i-chunks walk up, odd ones walk down, so neighbouring chunks touch the shared halo
//     planes at the same moment (one DRAM fetch, one L2 hit);
//   * input loads carry an L2 evict_first policy, output uses plain stores (stays in L2);
//   * arithmetic is fp32, same expression and order as the baseline, rounded once (RN).
// Fallbacks: the register-march vec8 kernel for nz % 8 == 0 with nz > 256, and a fused coalesced
// scalar kernel for every other shape / alignment.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef ST3_STAGES
#define ST3_STAGES 6      // ring stages (planes) per block
#endif
#ifndef ST3_BPS
#define ST3_BPS 4         // target resident blocks per SM
#endif
#ifndef ST3_LDPOL
#define ST3_LDPOL 1       // 0: no L2 hint on input loads, 1: L2 evict_first
#endif
#ifndef ST3_STPOL
#define ST3_STPOL 1       // 0: st.global.cs, 1: plain store, 2: L2 evict_last hint
#endif

#define ST3_THREADS 256
#define ST3_STAGE_BYTES 5120  // >= (256/nzc + 2) * nzc * 16 for every nzc in [1, 32]

static_assert(ST3_STAGES >= 3, "pipeline needs at least 3 stages");
static_assert(ST3_STAGES * ST3_STAGE_BYTES + ST3_STAGES * 8 <= 48 * 1024, "static smem limit");

#define FULL_MASK 0xffffffffu

// ---------------------------------------------------------------------------------------------
// small helpers
// ---------------------------------------------------------------------------------------------
static __device__ __forceinline__ float bf_lo(uint32_t v) { return __uint_as_float(v << 16); }
static __device__ __forceinline__ float bf_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

static __device__ __forceinline__ uint32_t pack_bf2(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // .x (low half) = a, .y (high half) = b
    return *reinterpret_cast<uint32_t*>(&h);
}

static __device__ __forceinline__ void unpack8(const uint4 v, float* f) {
    f[0] = bf_lo(v.x); f[1] = bf_hi(v.x);
    f[2] = bf_lo(v.y); f[3] = bf_hi(v.y);
    f[4] = bf_lo(v.z); f[5] = bf_hi(v.z);
    f[6] = bf_lo(v.w); f[7] = bf_hi(v.w);
}

static __device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

static __device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

static __device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n\t.reg .pred P1;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n\t"
            "selp.b32 %0, 1, 0, P1;\n\t"
            "}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

static __device__ __forceinline__ uint64_t make_ld_policy() {
    uint64_t pol = 0;
#if ST3_LDPOL == 1
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

static __device__ __forceinline__ uint64_t make_st_policy() {
    uint64_t pol = 0;
#if ST3_STPOL == 2
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

static __device__ __forceinline__ void bulk_g2s(uint32_t sdst, const void* gsrc, uint32_t bytes,
                                                uint32_t bar, uint64_t pol) {
#if ST3_LDPOL == 1
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;" ::"r"(sdst),
        "l"(gsrc), "r"(bytes), "r"(bar), "l"(pol)
        : "memory");
#else
    (void)pol;
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1], %2, [%3];" ::"r"(sdst),
        "l"(gsrc), "r"(bytes), "r"(bar)
        : "memory");
#endif
}

static __device__ __forceinline__ void st_out(uint4* p, const uint4 v, uint64_t pol) {
#if ST3_STPOL == 0
    (void)pol;
    __stcs(p, v);
#elif ST3_STPOL == 2
    asm volatile("st.global.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
                 : "memory");
#else
    (void)pol;
    *p = v;
#endif
}

// ---------------------------------------------------------------------------------------------
// Pipelined fused kernel (nz % 8 == 0, nzc = nz/8 <= 32, 16 B aligned pointers).
// 1-D block of 256 threads: tx = tid % nzc (k chunk), ty = tid / nzc (row in the block, < BY).
// 1-D grid: blockIdx.x = ic * gy + jb.
// Shared stage layout: row-major slab, stage row 0 = global row j0-1, nzc uint4 per row.
// Plane sequence: q = 0..NP-1, plane(q) = up ? pstart + q : pend - q; stage = q % S,
// barrier phase parity = (q / S) & 1.
// ---------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(ST3_THREADS, ST3_BPS)
stencil_3d_bf16_pipe(__nv_bfloat16* __restrict__ u_new, const __nv_bfloat16* __restrict__ u_old,
                     float r, int nx, int ny, int nz, int nzc, int BY, int gy, int IC) {
    __shared__ __align__(128) unsigned char sbuf[ST3_STAGES * ST3_STAGE_BYTES];
    __shared__ __align__(8) unsigned long long sbar[ST3_STAGES];

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int tx = tid % nzc;
    const int ty = tid / nzc;

    const int jb = (int)(blockIdx.x % (unsigned)gy);
    const int ic = (int)(blockIdx.x / (unsigned)gy);
    const int j0 = jb * BY;
    const int j = j0 + ty;
    const bool active = (ty < BY) && (j < ny);

    const int i0 = ic * IC;
    const int i1 = min(i0 + IC, nx) - 1;  // inclusive
    const int cnt = i1 - i0 + 1;          // >= 1, uniform over the block
    const bool up = (ic & 1) == 0;
    const int pstart = max(i0 - 1, 0);
    const int pend = min(i1 + 1, nx - 1);
    const int NP = pend - pstart + 1;
    const int q0 = up ? (i0 - pstart) : (pend - i1);  // 0 or 1

    // slab rows jlo..jhi (clamped), placed at stage row (jlo - (j0-1))
    const int jlo = max(j0 - 1, 0);
    const int jhi = min(j0 + BY, ny - 1);
    const uint32_t rowBytes = (uint32_t)nz * 2u;
    const uint32_t slabBytes = (uint32_t)(jhi - jlo + 1) * rowBytes;
    const uint32_t soff = (uint32_t)(jlo - (j0 - 1)) * rowBytes;

    const uint32_t sbase = smem_u32(sbuf);
    const uint32_t bbase = smem_u32(sbar);
    const char* gbase = reinterpret_cast<const char*>(u_old);
    const size_t planeBytes = (size_t)ny * (size_t)rowBytes;
    const size_t slabOff = (size_t)jlo * (size_t)rowBytes;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < ST3_STAGES; ++s) mbar_init(bbase + 8u * (uint32_t)s, 1u);
        fence_mbar_init();
    }
    __syncthreads();

    uint64_t ldpol = 0;
    int qiss = 0;  // next sequence position to issue (meaningful in tid 0 only)
    if (tid == 0) {
        ldpol = make_ld_policy();
        const int pro = min(NP, ST3_STAGES);
        for (; qiss < pro; ++qiss) {
            const int p = up ? (pstart + qiss) : (pend - qiss);
            const int s = qiss % ST3_STAGES;
            const uint32_t bar = bbase + 8u * (uint32_t)s;
            mbar_expect_tx(bar, slabBytes);
            bulk_g2s(sbase + (uint32_t)s * ST3_STAGE_BYTES + soff,
                     gbase + (size_t)p * planeBytes + slabOff, slabBytes, bar, ldpol);
        }
    }
    const uint64_t stpol = make_st_policy();

    uint4* __restrict__ dst = reinterpret_cast<uint4*>(u_new);
    const size_t siv = (size_t)ny * (size_t)nzc;  // i stride in uint4 units
    const size_t col = (size_t)(active ? j : 0) * (size_t)nzc + (size_t)tx;

    const int cidx = (ty + 1) * nzc + tx;  // centre chunk index inside a stage (uint4 units)
    const bool jint = (j >= 1) && (j <= ny - 2);
    const bool hasL = (lane > 0) && (tx > 0);        // lane-1 holds chunk tx-1 of the same row
    const bool hasR = (lane < 31) && (tx < nzc - 1);  // lane+1 holds chunk tx+1 of the same row
    const bool firstC = (tx == 0);
    const bool lastC = (tx == nzc - 1);

    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 pv = z, cv = z;  // centre column of seq positions qi-1 and qi
    int qw = 0;            // next sequence position to wait on

    for (int t = 0; t < cnt; ++t) {
        const int qi = q0 + t;
        const int i = up ? (i0 + t) : (i1 - t);

        const int qlead = min(qi + 1, NP - 1);
        while (qw <= qlead) {
            mbar_wait(bbase + 8u * (uint32_t)(qw % ST3_STAGES), (uint32_t)((qw / ST3_STAGES) & 1));
            ++qw;
        }

        const uint4* stC = reinterpret_cast<const uint4*>(sbuf + (qi % ST3_STAGES) * ST3_STAGE_BYTES);
        if (t == 0 && active) {
            cv = stC[cidx];
            if (qi >= 1) {
                const uint4* stP =
                    reinterpret_cast<const uint4*>(sbuf + ((qi - 1) % ST3_STAGES) * ST3_STAGE_BYTES);
                pv = stP[cidx];
            }
        }
        uint4 nv = z;
        if (active && (qi + 1 < NP)) {
            const uint4* stN =
                reinterpret_cast<const uint4*>(sbuf + ((qi + 1) % ST3_STAGES) * ST3_STAGE_BYTES);
            nv = stN[cidx];
        }

        const bool interior = active && jint && (i >= 1) && (i <= nx - 2);
        uint4 vjm = z, vjp = z;
        uint32_t left16 = 0u, right16 = 0u;
        if (interior) {
            vjm = stC[cidx - nzc];
            vjp = stC[cidx + nzc];
            const unsigned short* s16 = reinterpret_cast<const unsigned short*>(stC);
            if (!hasL && !firstC) left16 = (uint32_t)s16[cidx * 8 - 1];
            if (!hasR && !lastC) right16 = (uint32_t)s16[cidx * 8 + 8];
        }

        // all lanes execute these (loop trip count is block-uniform)
        const uint32_t shL = __shfl_up_sync(FULL_MASK, cv.w, 1);
        const uint32_t shR = __shfl_down_sync(FULL_MASK, cv.x, 1);
        if (hasL) left16 = shL >> 16;       // element 7 of chunk tx-1
        if (hasR) right16 = shR & 0xffffu;  // element 0 of chunk tx+1

        if (active) {
            uint4 o = cv;  // boundary rows / planes: verbatim copy
            if (interior) {
                float fc[10], fim[8], fip[8], fjm[8], fjp[8];
                fc[0] = __uint_as_float(left16 << 16);
                unpack8(cv, fc + 1);
                fc[9] = __uint_as_float(right16 << 16);
                unpack8(pv, fim);
                unpack8(nv, fip);
                unpack8(vjm, fjm);
                unpack8(vjp, fjp);
                float res[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float cc = fc[e + 1];
                    res[e] = cc + r * (fim[e] + fip[e] + fjp[e] + fjm[e] + fc[e + 2] + fc[e] - 6.0f * cc);
                }
                o.x = pack_bf2(res[0], res[1]);
                o.y = pack_bf2(res[2], res[3]);
                o.z = pack_bf2(res[4], res[5]);
                o.w = pack_bf2(res[6], res[7]);
                if (firstC) o.x = (o.x & 0xffff0000u) | (cv.x & 0x0000ffffu);  // k == 0 face
                if (lastC) o.w = (o.w & 0x0000ffffu) | (cv.w & 0xffff0000u);   // k == nz-1 face
            }
            st_out(dst + (size_t)i * siv + col, o, stpol);
        }

        pv = cv;
        cv = nv;

        // Stages of seq positions <= qi are no longer read (centre of qi+1 is in registers,
        // next iteration reads stage qi+1 and qi+2 only): refill them with qi+1+.. qi+S.
        __syncthreads();
        if (tid == 0) {
            const int lim = min(NP - 1, qi + ST3_STAGES);
            if (qiss <= lim) {
                fence_proxy_async();
                for (; qiss <= lim; ++qiss) {
                    const int p = up ? (pstart + qiss) : (pend - qiss);
                    const int s = qiss % ST3_STAGES;
                    const uint32_t bar = bbase + 8u * (uint32_t)s;
                    mbar_expect_tx(bar, slabBytes);
                    bulk_g2s(sbase + (uint32_t)s * ST3_STAGE_BYTES + soff,
                             gbase + (size_t)p * planeBytes + slabOff, slabBytes, bar, ldpol);
                }
            }
        }
    }
    // every issued copy (q <= NP-1) has been waited on in the last iteration (qlead == NP-1).
}

// ---------------------------------------------------------------------------------------------
// Vectorised register-march kernel (nz % 8 == 0, nz > 256). 1-D block of 256 threads:
// tx = tid % BX (k chunk), ty = tid / BX (j row). 1-D grid: k-block fastest, then j-block, then i.
// ---------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256, 4)
stencil_3d_bf16_vec8(__nv_bfloat16* __restrict__ u_new, const __nv_bfloat16* __restrict__ u_old,
                     float r, int nx, int ny, int nzc, int BX, int BY, int gxk, int gy, int IC) {
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int tx = tid % BX;
    const int ty = tid / BX;

    int b = blockIdx.x;
    const int kb = b % gxk;
    b /= gxk;
    const int jb = b % gy;
    const int ic = b / gy;

    const int kc = kb * BX + tx;
    const int j = jb * BY + ty;
    const bool active = (ty < BY) && (kc < nzc) && (j < ny);

    const int i0 = ic * IC;
    const int i1 = min(i0 + IC, nx) - 1;

    const uint4* __restrict__ src = reinterpret_cast<const uint4*>(u_old);
    uint4* __restrict__ dst = reinterpret_cast<uint4*>(u_new);
    const unsigned short* __restrict__ s16 = reinterpret_cast<const unsigned short*>(u_old);

    const size_t sjv = (size_t)nzc;
    const size_t siv = (size_t)ny * (size_t)nzc;
    const size_t col = (size_t)(active ? j : 0) * sjv + (size_t)(active ? kc : 0);

    const bool jint = (j >= 1) && (j <= ny - 2);
    const bool hasL = (lane > 0) && (tx > 0);
    const bool hasR = (lane < 31) && (tx < BX - 1);
    const bool firstC = (kc == 0);
    const bool lastC = (kc == nzc - 1);

    const uint64_t stpol = make_st_policy();

    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 pm = z, c = z, n1 = z, n2 = z;
    if (active) {
        if (i0 >= 1) pm = __ldg(src + (size_t)(i0 - 1) * siv + col);
        c = __ldg(src + (size_t)i0 * siv + col);
        if (i0 + 1 < nx) n1 = __ldg(src + (size_t)(i0 + 1) * siv + col);
        if (i0 + 2 < nx && i0 + 2 <= i1 + 1) n2 = __ldg(src + (size_t)(i0 + 2) * siv + col);
    }

    for (int i = i0; i <= i1; ++i) {
        uint4 n3 = z;
        if (active && (i + 3 <= i1 + 1) && (i + 3 < nx)) n3 = __ldg(src + (size_t)(i + 3) * siv + col);

        const bool interior = active && jint && (i >= 1) && (i <= nx - 2);
        const size_t p = (size_t)i * siv + col;

        uint4 vjm = z, vjp = z;
        uint32_t left16 = 0u, right16 = 0u;
        if (interior) {
            vjm = __ldg(src + p - sjv);
            vjp = __ldg(src + p + sjv);
            if (!hasL && !firstC) left16 = (uint32_t)__ldg(s16 + p * 8 - 1);
            if (!hasR && !lastC) right16 = (uint32_t)__ldg(s16 + p * 8 + 8);
        }

        const uint32_t shL = __shfl_up_sync(FULL_MASK, c.w, 1);
        const uint32_t shR = __shfl_down_sync(FULL_MASK, c.x, 1);
        if (hasL) left16 = shL >> 16;
        if (hasR) right16 = shR & 0xffffu;

        if (active) {
            uint4 o = c;
            if (interior) {
                float fc[10], fim[8], fip[8], fjm[8], fjp[8];
                fc[0] = __uint_as_float(left16 << 16);
                unpack8(c, fc + 1);
                fc[9] = __uint_as_float(right16 << 16);
                unpack8(pm, fim);
                unpack8(n1, fip);
                unpack8(vjm, fjm);
                unpack8(vjp, fjp);
                float res[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float cc = fc[e + 1];
                    res[e] = cc + r * (fim[e] + fip[e] + fjp[e] + fjm[e] + fc[e + 2] + fc[e] - 6.0f * cc);
                }
                o.x = pack_bf2(res[0], res[1]);
                o.y = pack_bf2(res[2], res[3]);
                o.z = pack_bf2(res[4], res[5]);
                o.w = pack_bf2(res[6], res[7]);
                if (firstC) o.x = (o.x & 0xffff0000u) | (c.x & 0x0000ffffu);
                if (lastC) o.w = (o.w & 0x0000ffffu) | (c.w & 0xffff0000u);
            }
            st_out(dst + p, o, stpol);
        }

        pm = c;
        c = n1;
        n1 = n2;
        n2 = n3;
    }
}

// ---------------------------------------------------------------------------------------------
// Fallback fused scalar kernel: block (32, 8) over (k, j), grid-stride over j and i.
// ---------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256)
stencil_3d_bf16_scalar(__nv_bfloat16* __restrict__ u_new, const __nv_bfloat16* __restrict__ u_old,
                       float r, int nx, int ny, int nz) {
    const int k = blockIdx.x * 32 + threadIdx.x;
    if (k >= nz) return;
    const size_t sj = (size_t)nz, si = (size_t)ny * (size_t)nz;
    for (int i = blockIdx.z; i < nx; i += gridDim.z) {
        for (int j = blockIdx.y * 8 + threadIdx.y; j < ny; j += gridDim.y * 8) {
            const size_t p = ((size_t)i * ny + j) * (size_t)nz + k;
            if (i == 0 || i == nx - 1 || j == 0 || j == ny - 1 || k == 0 || k == nz - 1) {
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
}

// ---------------------------------------------------------------------------------------------
// Host entry
// ---------------------------------------------------------------------------------------------
static int g_num_sms = 0;
static bool g_pipe_attr_done = false;

static int get_num_sms() {
    if (g_num_sms <= 0) {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
            g_num_sms = n;
        else
            g_num_sms = 132;
    }
    return g_num_sms;
}

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool vec = (nz % 8 == 0) &&
                         ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        if (vec && nz <= 256) {
            const int sms = get_num_sms();
            if (!g_pipe_attr_done) {
                cudaFuncSetAttribute(stencil_3d_bf16_pipe, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared);
                cudaGetLastError();  // attribute is only a preference; ignore failure
                g_pipe_attr_done = true;
            }
            const int nzc = nz / 8;             // 1..32
            const int BY = ST3_THREADS / nzc;   // rows per block (>= 8)
            const int gy = (ny + BY - 1) / BY;  // blocks per i plane
            const long long W = (long long)sms * ST3_BPS;  // one wave
            long long nic = W / gy;
            if (nic < 1) nic = 1;
            if (nic > nx) nic = nx;
            const int IC = (int)((nx + nic - 1) / nic);
            nic = (nx + IC - 1) / IC;
            const long long blocks = (long long)gy * nic;
            stencil_3d_bf16_pipe<<<(unsigned int)blocks, ST3_THREADS>>>(u_new, u_old, r, nx, ny, nz, nzc,
                                                                        BY, gy, IC);
        } else if (vec) {
            const int sms = get_num_sms();
            const int nzc = nz / 8;
            const int BX = nzc < 32 ? nzc : 32;
            const int BY = 256 / BX;
            const int gxk = (nzc + BX - 1) / BX;
            const int gy = (ny + BY - 1) / BY;
            const long long base = (long long)gxk * (long long)gy;
            const long long W = (long long)sms * 4;
            long long nic = W / base;
            if (nic < 1) nic = 1;
            if (nic > nx) nic = nx;
            const int IC = (int)((nx + nic - 1) / nic);
            nic = (nx + IC - 1) / IC;
            const long long blocks = base * nic;
            stencil_3d_bf16_vec8<<<(unsigned int)blocks, 256>>>(u_new, u_old, r, nx, ny, nzc, BX, BY,
                                                                 gxk, gy, IC);
        } else {
            dim3 block(32, 8, 1);
            unsigned int gx = (unsigned int)((nz + 31) / 32);
            int gyy = (ny + 7) / 8;
            if (gyy > 65535) gyy = 65535;
            int gz = nx;
            if (gz > 65535) gz = 65535;
            dim3 grid(gx, (unsigned int)gyy, (unsigned int)gz);
            stencil_3d_bf16_scalar<<<grid, block>>>(u_new, u_old, r, nx, ny, nz);
        }
    }
    cudaDeviceSynchronize();
}
