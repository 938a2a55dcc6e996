// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
//
// Fast path (nz % 8 == 0, both pointers 16-byte aligned):
//   * one fused kernel writes both the interior and the six boundary faces;
//   * each thread owns one 16-byte chunk (8 consecutive k cells); the lanes of a warp cover
//     consecutive chunks of the same (i,j) row -> wide coalesced loads/stores;
//   * k-1 / k+1 halos come from the neighbouring lane by warp shuffle;
//   * j-1 / j+1 halos come from a double-buffered shared plane: every thread writes its centre
//     chunk, one __syncthreads() per plane step, then reads rows ty-1 / ty+1. Only the block-edge
//     rows (ty == 0 -> row j0-1, ty == BY-1 -> row j0+BY) keep a pipelined global halo load;
//   * 2.5-D blocking: a block marches a chunk of i planes, centre column software-pipelined in a
//     4-slot register ring (plane t+3 issued at step t), loop unrolled by 4 (no rotation MOVs);
//   * i = 0 / i = nx-1 copy planes peeled; when the march already loads such a plane (its halo
//     plane) the copy is stored from the ring, not reloaded;
//   * odd i-chunks march downward, even ones upward (shared halo planes read at the same time);
//   * L2 policy: centre lines read exactly once from global (not a block-edge row, not a chunk's
//     first/last/halo plane) are loaded with an evict_first policy; everything read by two blocks
//     uses evict_normal. Stores are plain write-back (evict-normal), so write allocations pick
//     the clean, finished evict_first read lines as victims instead of dirty lines.
//   * arithmetic fp32, same expression and order as the baseline, rounded once (RN) at the store.
// Knobs (-D): STENCIL_L2_POLICY (1/0), STENCIL_STORE_CS (0 plain / 1 __stcs),
//             STENCIL_BLOCKS_PER_SM (0 = from occupancy).
// Fallback (any other shape/alignment): fused, coalesced scalar kernel, one thread per cell.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef STENCIL_L2_POLICY
#define STENCIL_L2_POLICY 1
#endif
#ifndef STENCIL_STORE_CS
#define STENCIL_STORE_CS 0
#endif
#ifndef STENCIL_BLOCKS_PER_SM
#define STENCIL_BLOCKS_PER_SM 0
#endif

#define FULL_MASK 0xffffffffu

#define BIG_NT 512
#define BIG_MINB 2
#define SMALL_NT 256
#define SMALL_MINB 4

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

#if STENCIL_L2_POLICY
static __device__ __forceinline__ unsigned long long make_policy_first() {
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
static __device__ __forceinline__ unsigned long long make_policy_normal() {
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
    return p;
}
static __device__ __forceinline__ uint4 ld_hint(const uint4* ptr, unsigned long long pol) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(ptr), "l"(pol));
    return v;
}
#define LDC(ptr, once) ld_hint((ptr), (once) ? polRow : polN)
#else
#define LDC(ptr, once) __ldg(ptr)
#endif

#if STENCIL_STORE_CS
#define STV(p, v) __stcs((p), (v))
#else
#define STV(p, v) (*(p) = (v))
#endif

// 8-cell stencil of one chunk. a / b: the two i-neighbour chunks (order irrelevant: a+b == b+a),
// c: centre chunk, m / p: j-1 / j+1 chunks, l16 / r16: bf16 bits of cells k-1 and k+8.
static __device__ __forceinline__ uint4 stencil8(const uint4 a, const uint4 c, const uint4 b,
                                                 const uint4 m, const uint4 p, uint32_t l16,
                                                 uint32_t r16, float r, bool firstC, bool lastC) {
    float fc[10], fa[8], fb[8], fm[8], fp[8];
    fc[0] = __uint_as_float(l16 << 16);
    unpack8(c, fc + 1);
    fc[9] = __uint_as_float(r16 << 16);
    unpack8(a, fa);
    unpack8(b, fb);
    unpack8(m, fm);
    unpack8(p, fp);
    float res[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const float cc = fc[e + 1];
        res[e] = cc + r * (fa[e] + fb[e] + fp[e] + fm[e] + fc[e + 2] + fc[e] - 6.0f * cc);
    }
    uint4 o;
    o.x = pack_bf2(res[0], res[1]);
    o.y = pack_bf2(res[2], res[3]);
    o.z = pack_bf2(res[4], res[5]);
    o.w = pack_bf2(res[6], res[7]);
    if (firstC) o.x = (o.x & 0xffff0000u) | (c.x & 0x0000ffffu);  // k == 0 face
    if (lastC) o.w = (o.w & 0x0000ffffu) | (c.w & 0xffff0000u);   // k == nz-1 face
    return o;
}

// One plane step of the march (block-uniform: every thread of the block executes it).
// CP / C0 / CN: centre column at planes t-1, t, t+1 (march order); HS: global halo row of an
// edge thread at plane t; BUF: shared buffer (t & 1). After the compute, CP receives plane t+3
// and HS receives plane t+2.
#define STENCIL_STEP(CP, C0, CN, HS, BUF)                                                          \
    do {                                                                                           \
        smem[BUF][tid] = (C0);                                                                     \
        const uint32_t shL_ = __shfl_up_sync(FULL_MASK, (C0).w, 1);                                \
        const uint32_t shR_ = __shfl_down_sync(FULL_MASK, (C0).x, 1);                              \
        __syncthreads();                                                                           \
        if (comp) {                                                                                \
            uint4 m_ = smem[BUF][mi];                                                              \
            uint4 p_ = smem[BUF][pi];                                                              \
            if (isTop) m_ = (HS);                                                                  \
            if (isBot) p_ = (HS);                                                                  \
            uint32_t l16_ = hasL ? (shL_ >> 16) : 0u;                                              \
            uint32_t r16_ = hasR ? (shR_ & 0xffffu) : 0u;                                          \
            if (needL) l16_ = (uint32_t)__ldg(reinterpret_cast<const unsigned short*>(ps) - 1);    \
            if (needR) r16_ = (uint32_t)__ldg(reinterpret_cast<const unsigned short*>(ps) + 8);    \
            STV(pd, stencil8((CP), (C0), (CN), m_, p_, l16_, r16_, r, firstC, lastC));             \
        } else if (active) {                                                                       \
            STV(pd, (C0));                                                                         \
        }                                                                                          \
        if (active && (t + 3 <= count)) (CP) = LDC(ps + o3, (t + 5 <= count));                     \
        if (haloT && (t + 2 < count)) (HS) = __ldg(ps + oH);                                       \
        ps += strd;                                                                                \
        pd += strd;                                                                                \
        ++t;                                                                                       \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Vectorised fused kernel. 1-D block of NT threads: tx = tid % BX (k chunk), ty = tid / BX (j row).
// 1-D grid decoded as (k-block fastest, then j-block, then i-chunk).
// ---------------------------------------------------------------------------------------------
template <int NT, int MINB>
__global__ void __launch_bounds__(NT, MINB)
stencil_3d_bf16_vec8(__nv_bfloat16* __restrict__ u_new, const __nv_bfloat16* __restrict__ u_old,
                     float r, int nx, int ny, int nzc, int BX, int BY, int gxk, int gy, int IC) {
    __shared__ uint4 smem[2][NT];

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
    const bool rowint = (j >= 1) && (j <= ny - 2);
    const bool comp = active && rowint;

    // j halo: rows ty-1 / ty+1 from shared memory, except at the block edges
    const bool isTop = (ty == 0);        // row j-1 = j0-1 is not in this block
    const bool isBot = (ty == BY - 1);   // row j+1 = j0+BY is not in this block
    const bool haloT = comp && (isTop || isBot);
    const int mi = isTop ? tid : tid - BX;
    const int pi = isBot ? tid : tid + BX;

    const bool hasL = (lane > 0) && (tx > 0);        // lane-1 holds chunk kc-1 of the same row
    const bool hasR = (lane < 31) && (tx < BX - 1);  // lane+1 holds chunk kc+1 of the same row
    const bool firstC = (kc == 0);
    const bool lastC = (kc == nzc - 1);
    const bool needL = comp && !hasL && !firstC;
    const bool needR = comp && !hasR && !lastC;

    // block's plane range [i0, i1]; interior planes [ia, ib]; march length = count
    const int i0 = ic * IC;
    const int i1 = min(i0 + IC, nx) - 1;
    const int ia = max(i0, 1);
    const int ib = min(i1, nx - 2);
    const int count = ib - ia + 1;  // block-uniform, may be <= 0
    const bool down = (ic & 1) != 0;

    const uint4* __restrict__ src = reinterpret_cast<const uint4*>(u_old);
    uint4* __restrict__ dst = reinterpret_cast<uint4*>(u_new);

    const long long sjv = (long long)nzc;                 // j stride in uint4 units
    const long long siv = (long long)ny * (long long)nzc;  // i stride in uint4 units
    const long long col = active ? ((long long)j * sjv + (long long)kc) : 0ll;

    const long long strd = down ? -siv : siv;
    const int start = down ? ib : ia;
    const long long soff = (count > 0) ? ((long long)start * siv + col) : col;
    const uint4* ps = src + soff;  // centre column of plane t of the march
    uint4* pd = dst + soff;

#if STENCIL_L2_POLICY
    // Lines read exactly once from global: not a block-edge row (those are re-read by the
    // neighbouring j-block), not next to a k-block edge (scalar halo reads, nz > 256 only).
    const unsigned long long polN = make_policy_normal();
    const unsigned long long polF = make_policy_first();
    const bool kEdge = (gxk > 1) && ((tx < 8) || (tx >= BX - 8));
    const unsigned long long polRow = (!isTop && !isBot && !kEdge) ? polF : polN;
#endif

    const long long hoff = isTop ? -sjv : sjv;  // global halo row of an edge thread

    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 A = z, B = z, C = z, D = z;  // centre ring
    uint4 HA = z, HB = z;              // edge-row halo ring

    const bool cp0 = active && (i0 == 0);
    const bool cpN = active && (i1 == nx - 1) && (nx > 1);
    const long long offN = (long long)(nx - 1) * siv + col;

    if (count > 0) {
        // ---- prologue: every load the first two steps need, issued before anything waits ----
        // march planes 1 .. count-2 are read by this block only (0 / count-1 / halos are shared)
        if (active) {
            A = LDC(ps - strd, false);                               // t = -1 (halo plane)
            B = LDC(ps, false);                                      // t = 0
            C = LDC(ps + strd, count >= 3);                          // t = 1
            if (count >= 2) D = LDC(ps + 2 * strd, count >= 4);      // t = 2
        }
        if (haloT) {
            HA = __ldg(ps + hoff);
            if (count >= 2) HB = __ldg(ps + strd + hoff);
        }
        // ---- peeled copy planes that the march already loaded as its halo plane A ----
        if (cp0) STV(dst + col, A);            // chunk 0 always marches up: A = plane 0
        if (cpN && down) STV(dst + offN, A);   // downward last chunk: A = plane ib+1 = nx-1
    } else if (active) {
        uint4 v0 = z, vN = z;
        if (cp0) v0 = __ldg(src + col);
        if (cpN) vN = __ldg(src + offN);
        if (cp0) STV(dst + col, v0);
        if (cpN) STV(dst + offN, vN);
    }

    // ---- the march over interior planes (block-uniform trip count: barriers are safe) ----
    if (count > 0) {
        const long long o3 = 3 * strd;          // centre column, plane t+3
        const long long oH = 2 * strd + hoff;   // edge halo row, plane t+2
        int t = 0;
        int n = count;
        while (n >= 4) {
            STENCIL_STEP(A, B, C, HA, 0);
            STENCIL_STEP(B, C, D, HB, 1);
            STENCIL_STEP(C, D, A, HA, 0);
            STENCIL_STEP(D, A, B, HB, 1);
            n -= 4;
        }
        if (n > 0) {
            STENCIL_STEP(A, B, C, HA, 0);
            if (n > 1) {
                STENCIL_STEP(B, C, D, HB, 1);
                if (n > 2) {
                    STENCIL_STEP(C, D, A, HA, 0);
                }
            }
        }
        // upward last chunk: plane nx-1 = march index count, held in ring slot (count+1) & 3
        if (cpN && !down) {
            const int s = (count + 1) & 3;
            const uint4 v = (s == 0) ? A : (s == 1) ? B : (s == 2) ? C : D;
            STV(dst + offN, v);
        }
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

static int g_num_sms = 0;
static int g_bps_big = 0;
static int g_bps_small = 0;

template <int NT, int MINB>
static int vec_blocks_per_sm(int& cache) {
    if (cache <= 0) {
        int bps = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, stencil_3d_bf16_vec8<NT, MINB>, NT, 0) !=
                cudaSuccess ||
            bps <= 0) {
            (void)cudaGetLastError();
            bps = MINB;
        }
        if (bps > 2048 / NT) bps = 2048 / NT;
        cache = bps;
    }
#if STENCIL_BLOCKS_PER_SM > 0
    return STENCIL_BLOCKS_PER_SM;
#else
    return cache;
#endif
}

struct VecCfg {
    int BX, BY, gxk, gy, IC;
    long long base, blocks;
};

static VecCfg vec_cfg(int NT, int bps, int nx, int ny, int nzc) {
    VecCfg c;
    c.BX = nzc < 32 ? nzc : 32;
    c.BY = NT / c.BX;
    c.gxk = (nzc + c.BX - 1) / c.BX;
    c.gy = (ny + c.BY - 1) / c.BY;
    c.base = (long long)c.gxk * (long long)c.gy;                  // blocks per i plane
    const long long W = (long long)g_num_sms * (long long)bps;     // one full wave
    long long nic = W / c.base;
    if (nic < 1) nic = 1;
    if (nic > nx) nic = nx;
    c.IC = (int)((nx + nic - 1) / nic);
    nic = (nx + c.IC - 1) / c.IC;
    c.blocks = c.base * nic;
    return c;
}

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool vec = (nz % 8 == 0) &&
                         ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        if (vec) {
            if (g_num_sms <= 0) {
                int dev = 0, n = 0;
                if (cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
                    g_num_sms = n;
                else
                    g_num_sms = 132;
            }
            const int nzc = nz / 8;
            const int bpsB = vec_blocks_per_sm<BIG_NT, BIG_MINB>(g_bps_big);
            const VecCfg cb = vec_cfg(BIG_NT, bpsB, nx, ny, nzc);
            if (cb.base * (long long)nx >= (long long)g_num_sms) {
                // tall tiles (512 threads): more once-read rows, longer i-chunks
                stencil_3d_bf16_vec8<BIG_NT, BIG_MINB><<<(unsigned int)cb.blocks, BIG_NT>>>(
                    u_new, u_old, r, nx, ny, nzc, cb.BX, cb.BY, cb.gxk, cb.gy, cb.IC);
            } else {
                // tiny volumes: 256-thread tiles so that more SMs get work
                const int bpsS = vec_blocks_per_sm<SMALL_NT, SMALL_MINB>(g_bps_small);
                const VecCfg cs = vec_cfg(SMALL_NT, bpsS, nx, ny, nzc);
                stencil_3d_bf16_vec8<SMALL_NT, SMALL_MINB><<<(unsigned int)cs.blocks, SMALL_NT>>>(
                    u_new, u_old, r, nx, ny, nzc, cs.BX, cs.BY, cs.gxk, cs.gy, cs.IC);
            }
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
