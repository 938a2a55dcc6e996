// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
// Layout: p = (i*ny + j)*nz + k  (k fastest).
//
// Fast path (nz % 8 == 0, both pointers 16-byte aligned): each thread owns 8 consecutive
// k-elements (one uint4 of bf16). k-neighbours come from registers and warp shuffles,
// j-neighbours from L1/L2, i-neighbours from a sliding register window along i (C planes/thread).
// Arithmetic is fp32 in the baseline's order, rounded once (RN) at the store.
//
//  * small problems (totalV <= 2^18 uint4, i.e. <= 4 MB): round1-c1 kernel, C = 1, unchanged.
//  * larger problems: one-wave persistent grid (G = #SMs * occupancy).  Work items are
//    (x-tile, i-chunk) pairs in linear order n = ch*gx + x; block b runs n = b, b+G, ...
//    Warp 0 issues cp.async.bulk.prefetch.L2 for everything an item reads (planes i0-1..i0+C,
//    tile widened by one j-row on each side), for the current item at start and D items ahead
//    before each item, so the register loads that follow mostly hit L2.
//
// Generic fallback (any other nz / alignment): one thread per element, grid-stride, fused boundary.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstddef>
#include <climits>

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

// ---------------------------------------------------------------------------------------------
// Shared per-chunk body: processes planes i0 .. i0+C-1 of the x-tile containing index t.
// Must be called block-uniformly (warp shuffles inside).
// ---------------------------------------------------------------------------------------------
template <int C>
__device__ __forceinline__ void process_chunk(uint4* __restrict__ out, const uint4* __restrict__ in,
                                              const unsigned short* __restrict__ in16, float r,
                                              int nx, int ny, int V, size_t planeV, size_t t,
                                              int i0, int lane) {
    const bool valid = t < planeV;
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

// ---------------------------------------------------------------------------------------------
// round1-c1 kernel (used for small problems)
// ---------------------------------------------------------------------------------------------
template <int C, int BS>
__global__ void __launch_bounds__(BS, 2048 / BS / 2)
stencil_3d_bf16_fast(uint4* __restrict__ out, const uint4* __restrict__ in,
                     const unsigned short* __restrict__ in16, float r, int nx, int ny, int V,
                     int nchunks) {
    const size_t planeV = (size_t)ny * (size_t)V;
    const size_t t = (size_t)blockIdx.x * BS + threadIdx.x;
    const int lane = threadIdx.x & 31;
    for (int ch = blockIdx.y; ch < nchunks; ch += gridDim.y) {   // block-uniform
        process_chunk<C>(out, in, in16, r, nx, ny, V, planeV, t, ch * C, lane);
    }
}

// ---------------------------------------------------------------------------------------------
// L2 bulk prefetch of one work item (x-tile, i-chunk).  Called by warp 0; lane L handles
// plane pl = L/3 (i = i0-1+pl) and segment seg = L%3.
//   halo planes (pl == 0, pl == C+1): only the tile itself [t0, t0+BS).
//   inner planes, V <= BS: one merged range [t0-V, t0+BS+V) (jm / jp rows included).
//   inner planes, V >  BS: three ranges, rows j-1, j, j+1 of the tile.
// All ranges clamped to the plane; address and size are multiples of 16 bytes.
// ---------------------------------------------------------------------------------------------
template <int C, int BS>
__device__ __forceinline__ void prefetch_item(const uint4* in, int x, int ch, int nx,
                                              size_t planeV, int V, int lane) {
    const int pl = lane / 3;
    const int seg = lane - 3 * pl;
    if (pl > C + 1) return;
    const long long i = (long long)ch * C - 1 + pl;
    if (i < 0 || i >= (long long)nx) return;
    const long long t0 = (long long)x * BS;
    const bool halo = (pl == 0) || (pl == C + 1);
    long long lo, hi;
    if (halo) {
        if (seg != 1) return;
        lo = t0;
        hi = t0 + BS;
    } else if (V <= BS) {
        if (seg != 1) return;
        lo = t0 - V;
        hi = t0 + BS + V;
    } else {
        lo = t0 + (long long)(seg - 1) * (long long)V;
        hi = lo + BS;
    }
    if (lo < 0) lo = 0;
    if (hi > (long long)planeV) hi = (long long)planeV;
    if (hi <= lo) return;
    const uint4* p = in + (size_t)i * planeV + (size_t)lo;
    const unsigned bytes = (unsigned)((hi - lo) * 16);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Persistent one-wave kernel with L2 bulk prefetch D items ahead.
// ---------------------------------------------------------------------------------------------
template <int C, int BS, int D>
__global__ void __launch_bounds__(BS, 2048 / BS / 2)
stencil_3d_bf16_persist(uint4* __restrict__ out, const uint4* __restrict__ in,
                        const unsigned short* __restrict__ in16, float r, int nx, int ny, int V,
                        int gx, int nitems) {
    const size_t planeV = (size_t)ny * (size_t)V;
    const int lane = threadIdx.x & 31;
    const bool pfw = threadIdx.x < 32;
    const int G = (int)gridDim.x;

    // prefetch the first D items of this block (current one included)
    if (pfw) {
#pragma unroll
        for (int d = 0; d < D; ++d) {
            const long long m = (long long)blockIdx.x + (long long)d * G;
            if (m < (long long)nitems) {
                const int mm = (int)m;
                const int mch = mm / gx;
                prefetch_item<C, BS>(in, mm - mch * gx, mch, nx, planeV, V, lane);
            }
        }
    }

    for (int n = blockIdx.x; n < nitems; n += G) {   // block-uniform
        if (pfw) {
            const long long m = (long long)n + (long long)D * G;
            if (m < (long long)nitems) {
                const int mm = (int)m;
                const int mch = mm / gx;
                prefetch_item<C, BS>(in, mm - mch * gx, mch, nx, planeV, V, lane);
            }
        }
        const int ch = n / gx;
        const int x = n - ch * gx;
        const size_t t = (size_t)x * BS + threadIdx.x;
        process_chunk<C>(out, in, in16, r, nx, ny, V, planeV, t, ch * C, lane);
    }
}

// ---------------------------------------------------------------------------------------------
// Generic fallback
// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------
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

static int num_sms_cached() {
    static int sms = 0;
    if (sms <= 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        int v = 0;
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
        sms = (v > 0) ? v : 132;
    }
    return sms;
}

template <int C, int BS, int D>
static int persist_grid_cached() {
    static int g = 0;
    if (g <= 0) {
        int nb = 0;
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, stencil_3d_bf16_persist<C, BS, D>, BS,
                                                      0);
        if (nb <= 0) nb = 1;
        g = num_sms_cached() * nb;
    }
    return g;
}

// Returns false if the problem does not fit the persistent indexing (caller falls back).
template <int C, int BS, int D>
static bool launch_persist(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                           int ny, int V) {
    const size_t planeV = (size_t)ny * (size_t)V;
    const size_t gxs = (planeV + BS - 1) / BS;
    const size_t nchunks = ((size_t)nx + C - 1) / C;
    const size_t items = gxs * nchunks;
    if (gxs == 0 || items == 0 || items > (size_t)(INT_MAX / 4)) return false;
    const int nitems = (int)items;
    int G = persist_grid_cached<C, BS, D>();
    if (G > nitems) G = nitems;
    if (G < 1) G = 1;
    stencil_3d_bf16_persist<C, BS, D><<<dim3((unsigned)G, 1, 1), dim3(BS, 1, 1)>>>(
        reinterpret_cast<uint4*>(u_new), reinterpret_cast<const uint4*>(u_old),
        reinterpret_cast<const unsigned short*>(u_old), r, nx, ny, V, (int)gxs, nitems);
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
            if (totalV <= ((size_t)1 << 18)) {
                // <= 4 MB: round1-c1 path unchanged
                if (totalV >= ((size_t)1 << 17)) {
                    launch_fast<1, 256>(u_new, u_old, r, nx, ny, V);
                } else {
                    launch_fast<1, 128>(u_new, u_old, r, nx, ny, V);
                }
            } else {
                bool ok;
                if (totalV >= ((size_t)1 << 20)) {
                    ok = launch_persist<4, 256, 1>(u_new, u_old, r, nx, ny, V);   // >= 16 MB
                } else {
                    ok = launch_persist<2, 256, 1>(u_new, u_old, r, nx, ny, V);   // 4-16 MB
                }
                if (!ok) launch_fast<4, 256>(u_new, u_old, r, nx, ny, V);
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
