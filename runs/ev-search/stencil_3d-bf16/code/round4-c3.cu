// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
// Layout: p = (i*ny + j)*nz + k  (k fastest). V = nz/8 vectors (uint4 of 8 bf16) per row.
//
// round4-c3 (launch overhead):
//  * Submission: every kernel takes ONE argument struct by value and is launched with the driver's
//    cuLaunchKernel, obtained once through cudaGetDriverEntryPoint(ByVersion) (no libcuda link),
//    on a CUfunction obtained once per kernel through cudaGetFuncBySymbol. Any failure falls back
//    to cudaLaunchKernel (same kernel, same arguments), so correctness never depends on it.
//  * Completion wait: STENCIL_SYNC_MODE (0 = cudaDeviceSynchronize, 1 = cudaStreamSynchronize on the
//    launch stream (default), 2 = spin on cudaStreamQuery). Always returns after the kernel is done.
//  * Fewer, larger CTAs for the one-wave kernels:
//      totalV < 2^17 : reg1<256>   (1-2 MB moved: 128-256 CTAs)
//      totalV < 2^18 : reg1<512>   (4.2 MB: 256 CTAs)
//      totalV < 2^19 : reg1<1024>  (8.4 MB: 256 CTAs, <=32 regs, 2 CTAs/SM = full occupancy)
//      totalV < 2^20 : staged tile with 512-thread CTAs (C=4, up to 60 KB dynamic smem, 2 CTAs/SM)
//      otherwise     : rolling-window register kernel (C=4, 256 threads), unchanged
//      nz % 8 != 0 or misaligned: generic one-thread-per-element kernel.
// Arithmetic is fp32 in the baseline's order, rounded once (RN) at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstddef>

#define FULL_MASK 0xffffffffu

#ifndef STENCIL_SYNC_MODE
#define STENCIL_SYNC_MODE 1
#endif

// ------------------------------------------------------------------------------------------------
// argument structs (one by-value kernel parameter each)
// ------------------------------------------------------------------------------------------------
struct Reg1Args {
    uint4* out;
    const uint4* in;
    const unsigned short* in16;
    float r;
    unsigned nx, ny, V, totalV;
};

struct StagedArgs {
    uint4* out;
    const uint4* in;
    float r;
    int nx, ny, V, R;
};

struct FastArgs {
    uint4* out;
    const uint4* in;
    const unsigned short* in16;
    float r;
    int nx, ny, V, nchunks;
};

struct GenericArgs {
    __nv_bfloat16* u_new;
    const __nv_bfloat16* u_old;
    float r;
    int nx, ny, nz;
    size_t total;
};

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

__device__ __forceinline__ void cp_async16(void* sdst, const void* gsrc) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(sdst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gsrc) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// ------------------------------------------------------------------------------------------------
// Path A: full-occupancy C=1 register kernel (one thread per vector, whole volume, 32-bit indices).
// __launch_bounds__(BS, 2048/BS) keeps it at <= 32 registers for every BS (2048 threads / SM).
// ------------------------------------------------------------------------------------------------
template <int BS>
__global__ void __launch_bounds__(BS, 2048 / BS)
stencil_3d_bf16_reg1(const Reg1Args a) {
    uint4* __restrict__ out = a.out;
    const uint4* __restrict__ in = a.in;
    const unsigned short* __restrict__ in16 = a.in16;
    const float r = a.r;
    const unsigned nx = a.nx, ny = a.ny, V = a.V, totalV = a.totalV;

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
// Path B: one-shot staged tile. Block = C planes (i) x R rows (j) x full rows (V vectors).
// Shared memory holds (C+2) x (R+2) x V vectors (halo planes / rows included where they exist).
// Requires V <= BS and R*V <= BS (host guarantees).
// ------------------------------------------------------------------------------------------------
template <int C, int BS>
__global__ void __launch_bounds__(BS, 2)
stencil_3d_bf16_staged(const StagedArgs a) {
    extern __shared__ uint4 sm[];
    uint4* __restrict__ out = a.out;
    const uint4* __restrict__ in = a.in;
    const float r = a.r;
    const int nx = a.nx, ny = a.ny, V = a.V, R = a.R;

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
// Path C (round1-c1): rolling register window along i, C planes per thread.
// ------------------------------------------------------------------------------------------------
template <int C, int BS>
__global__ void __launch_bounds__(BS, 2048 / BS / 2)
stencil_3d_bf16_fast(const FastArgs a) {
    uint4* __restrict__ out = a.out;
    const uint4* __restrict__ in = a.in;
    const unsigned short* __restrict__ in16 = a.in16;
    const float r = a.r;
    const int nx = a.nx, ny = a.ny, V = a.V, nchunks = a.nchunks;

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
stencil_3d_bf16_generic(const GenericArgs a) {
    __nv_bfloat16* __restrict__ u_new = a.u_new;
    const __nv_bfloat16* __restrict__ u_old = a.u_old;
    const float r = a.r;
    const int nx = a.nx, ny = a.ny, nz = a.nz;
    const size_t total = a.total;

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
// Cheap submission: cuLaunchKernel through the runtime's driver entry point (no libcuda link),
// CUfunction per kernel from cudaGetFuncBySymbol, both cached. Fallback: cudaLaunchKernel.
// ------------------------------------------------------------------------------------------------
// Same ABI as CUresult cuLaunchKernel(CUfunction, unsigned x6, unsigned, CUstream, void**, void**).
typedef int (*LaunchKernelFn)(cudaFunction_t, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, unsigned int, unsigned int, cudaStream_t,
                              void**, void**);

static LaunchKernelFn resolve_driver_launch() {
    void* p = nullptr;
#if defined(CUDART_VERSION) && (CUDART_VERSION >= 12050)
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        p = nullptr;
#else
    if (cudaGetDriverEntryPoint("cuLaunchKernel", &p, cudaEnableDefault) != cudaSuccess) p = nullptr;
#endif
    (void)cudaGetLastError();   // never leave a (non-sticky) lookup error behind
    return reinterpret_cast<LaunchKernelFn>(p);
}

static inline LaunchKernelFn driver_launch() {
    static LaunchKernelFn fn = resolve_driver_launch();
    return fn;
}

struct KHandle {
    cudaFunction_t f;
    int state;   // 0 = unresolved, 1 = driver launch path, -1 = runtime launch path
};

template <typename Args>
static inline void launch_kernel(void (*kern)(Args), KHandle& h, dim3 g, dim3 b, unsigned smem,
                                 Args a) {
    void* params[1] = {&a};
    if (h.state == 0) {
        h.state = -1;
        if (driver_launch() != nullptr) {
            cudaFunction_t f = nullptr;
            if (cudaGetFuncBySymbol(&f, (const void*)kern) == cudaSuccess && f != nullptr) {
                h.f = f;
                h.state = 1;
            } else {
                (void)cudaGetLastError();
            }
        }
    }
    if (h.state == 1) {
        const int rc = driver_launch()(h.f, g.x, g.y, g.z, b.x, b.y, b.z, smem, (cudaStream_t)0,
                                       params, nullptr);
        if (rc == 0) return;   // CUDA_SUCCESS
        h.state = -1;          // never try the driver path again for this kernel
    }
    cudaLaunchKernel((const void*)kern, g, b, params, (size_t)smem, (cudaStream_t)0);
}

static inline void wait_done() {
#if STENCIL_SYNC_MODE == 0
    cudaDeviceSynchronize();
#elif STENCIL_SYNC_MODE == 2
    cudaError_t e;
    while ((e = cudaStreamQuery((cudaStream_t)0)) == cudaErrorNotReady) {
    }
    if (e != cudaSuccess) cudaDeviceSynchronize();
#else
    cudaStreamSynchronize((cudaStream_t)0);
#endif
}

// ------------------------------------------------------------------------------------------------
// host launchers
// ------------------------------------------------------------------------------------------------
template <int C, int BS>
static void launch_fast(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                        int V) {
    static KHandle h = {nullptr, 0};
    const size_t planeV = (size_t)ny * (size_t)V;
    const size_t gxs = (planeV + BS - 1) / BS;
    const unsigned gx = (unsigned)gxs;
    const int nchunks = (nx + C - 1) / C;
    const unsigned gy = (unsigned)(nchunks < 65535 ? nchunks : 65535);
    FastArgs a;
    a.out = reinterpret_cast<uint4*>(u_new);
    a.in = reinterpret_cast<const uint4*>(u_old);
    a.in16 = reinterpret_cast<const unsigned short*>(u_old);
    a.r = r;
    a.nx = nx;
    a.ny = ny;
    a.V = V;
    a.nchunks = nchunks;
    launch_kernel<FastArgs>(stencil_3d_bf16_fast<C, BS>, h, dim3(gx, gy, 1), dim3(BS, 1, 1), 0u, a);
}

template <int BS>
static void launch_reg1(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                        int V, size_t totalV) {
    static KHandle h = {nullptr, 0};
    const unsigned blocks = (unsigned)((totalV + BS - 1) / BS);
    Reg1Args a;
    a.out = reinterpret_cast<uint4*>(u_new);
    a.in = reinterpret_cast<const uint4*>(u_old);
    a.in16 = reinterpret_cast<const unsigned short*>(u_old);
    a.r = r;
    a.nx = (unsigned)nx;
    a.ny = (unsigned)ny;
    a.V = (unsigned)V;
    a.totalV = (unsigned)totalV;
    launch_kernel<Reg1Args>(stencil_3d_bf16_reg1<BS>, h, dim3(blocks, 1, 1), dim3(BS, 1, 1), 0u, a);
}

static constexpr int kStagedC = 4;
static constexpr int kStagedBS = 512;
static constexpr int kStagedSmemMax = 64 * 1024;   // (C+2)*(R+2)*V*16 <= 6*(512+128)*16 = 61440

// Returns false when the staged tile does not apply (caller falls back).
static bool launch_staged(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                          int ny, int V) {
    constexpr int C = kStagedC;
    constexpr int BS = kStagedBS;
    if (V < 1 || V > 64) return false;            // full rows in smem; V <= BS for the mapping
    int R = BS / V;                                // R * V <= BS: one output row slot per thread
    if (R > ny) R = ny;
    if (R < 1) R = 1;
    const size_t njt = ((size_t)ny + R - 1) / R;
    const size_t nit = ((size_t)nx + C - 1) / C;
    if (njt > 65535 || nit > 0x7fffffffu) return false;
    const size_t smem = (size_t)(C + 2) * (size_t)(R + 2) * (size_t)V * sizeof(uint4);
    if (smem > (size_t)kStagedSmemMax) return false;

    static int attr_state = 0;   // 0 = not set, 1 = large dynamic smem enabled, -1 = failed
    if (attr_state == 0) {
        const cudaError_t e = cudaFuncSetAttribute(stencil_3d_bf16_staged<C, BS>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   kStagedSmemMax);
        cudaFuncSetAttribute(stencil_3d_bf16_staged<C, BS>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
        attr_state = (e == cudaSuccess) ? 1 : -1;
        (void)cudaGetLastError();
    }
    if (attr_state != 1 && smem > (size_t)48 * 1024) return false;

    static KHandle h = {nullptr, 0};
    StagedArgs a;
    a.out = reinterpret_cast<uint4*>(u_new);
    a.in = reinterpret_cast<const uint4*>(u_old);
    a.r = r;
    a.nx = nx;
    a.ny = ny;
    a.V = V;
    a.R = R;
    launch_kernel<StagedArgs>(stencil_3d_bf16_staged<C, BS>, h,
                              dim3((unsigned)nit, (unsigned)njt, 1), dim3(BS, 1, 1),
                              (unsigned)smem, a);
    return true;
}

static void launch_generic(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                           int ny, int nz) {
    static KHandle h = {nullptr, 0};
    const size_t total = (size_t)nx * (size_t)ny * (size_t)nz;
    size_t blocks = (total + 255) / 256;
    if (blocks > ((size_t)1 << 20)) blocks = (size_t)1 << 20;
    if (blocks < 1) blocks = 1;
    GenericArgs a;
    a.u_new = u_new;
    a.u_old = u_old;
    a.r = r;
    a.nx = nx;
    a.ny = ny;
    a.nz = nz;
    a.total = total;
    launch_kernel<GenericArgs>(stencil_3d_bf16_generic, h, dim3((unsigned)blocks, 1, 1),
                               dim3(256, 1, 1), 0u, a);
}

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool aligned =
            ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        if ((nz % 8) == 0 && aligned) {
            const int V = nz / 8;
            const size_t totalV = (size_t)nx * (size_t)ny * (size_t)V;
            if (totalV < ((size_t)1 << 17)) {
                launch_reg1<256>(u_new, u_old, r, nx, ny, V, totalV);
            } else if (totalV < ((size_t)1 << 18)) {
                launch_reg1<512>(u_new, u_old, r, nx, ny, V, totalV);
            } else if (totalV < ((size_t)1 << 19)) {
                launch_reg1<1024>(u_new, u_old, r, nx, ny, V, totalV);
            } else if (totalV < ((size_t)1 << 20)) {
                if (!launch_staged(u_new, u_old, r, nx, ny, V))
                    launch_fast<2, 256>(u_new, u_old, r, nx, ny, V);
            } else {
                launch_fast<4, 256>(u_new, u_old, r, nx, ny, V);
            }
        } else {
            launch_generic(u_new, u_old, r, nx, ny, nz);
        }
    }
    wait_done();
}
