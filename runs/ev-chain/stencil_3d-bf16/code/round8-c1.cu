// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
//
// Fast path (nz % 8 == 0, both pointers 16-byte aligned):
//   * one fused kernel writes both the interior and the six boundary faces;
//   * each thread owns one 16-byte chunk (8 consecutive k cells); the lanes of a warp cover
//     consecutive chunks of the same (i,j) row -> wide coalesced loads/stores;
//   * k-1 / k+1 halos come from the neighbouring lane by warp shuffle (scalar load only at
//     warp edges that are not k faces: never for nz <= 256);
//   * 2.5-D blocking: a block marches a chunk of i planes, all streams software pipelined
//     through a register ring (manual rotation, no rotation MOVs);
//   * the i = 0 and i = nx-1 copy planes are peeled out of the march;
//   * odd i-chunks march downward, even chunks upward (shared halo planes read at ~same time);
//   * arithmetic is fp32, same expression and order as the baseline, rounded once (RN).
// Round 8 changes:
//   1. outputs are written with plain write-back stores (define USE_STCS for the old
//      evict-first __stcs stores);
//   2. BX is a template parameter (8/16/32 + generic), 3-D grid (k-block, j-block, i-chunk)
//      with the same linear block order (no runtime div/mod in the block decode), 32-bit
//      index math when the volume fits, prologue loads issued before the flag set-up;
//   3. optional (define RING5): 5-slot centre ring, plane t+3 issued at the top of each step.
// Fallback (any other shape/alignment): fused, coalesced scalar kernel, one thread per cell.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

#ifdef USE_STCS
#define STORE_OUT(p, v) __stcs((p), (v))
#else
#define STORE_OUT(p, v) (*(p) = (v))
#endif

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

// Shuffles + compute + store of one plane step. CP / C0 / CN: centre column at planes
// t-1, t, t+1 (march order); M0 / P0: j-1 / j+1 rows at plane t.
#define STENCIL_BODY(CP, C0, CN, M0, P0)                                                           \
    do {                                                                                           \
        const uint32_t shL_ = __shfl_up_sync(FULL_MASK, (C0).w, 1);                                \
        const uint32_t shR_ = __shfl_down_sync(FULL_MASK, (C0).x, 1);                              \
        if (comp) {                                                                                \
            uint32_t l16_ = hasL ? (shL_ >> 16) : 0u;                                              \
            uint32_t r16_ = hasR ? (shR_ & 0xffffu) : 0u;                                          \
            if (needL) l16_ = (uint32_t)__ldg(reinterpret_cast<const unsigned short*>(ps) - 1);    \
            if (needR) r16_ = (uint32_t)__ldg(reinterpret_cast<const unsigned short*>(ps) + 8);    \
            STORE_OUT(pd, stencil8((CP), (C0), (CN), (M0), (P0), l16_, r16_, r, firstC, lastC));   \
        } else if (active) {                                                                       \
            STORE_OUT(pd, (C0));                                                                   \
        }                                                                                          \
    } while (0)

// j-1 / j+1 rows of plane t+2 into the slots that just died, then advance.
#define STENCIL_ADVANCE(M0, P0)                                                                    \
    do {                                                                                           \
        if (comp && (t + 2 < count)) {                                                             \
            (M0) = __ldg(ps + oM);                                                                 \
            (P0) = __ldg(ps + oP);                                                                 \
        }                                                                                          \
        ps += strd;                                                                                \
        pd += strd;                                                                                \
        ++t;                                                                                       \
    } while (0)

// 4-slot ring: after the compute, CP (plane t-1, dead) receives plane t+3.
#define STENCIL_STEP(CP, C0, CN, M0, P0)                                                           \
    do {                                                                                           \
        STENCIL_BODY(CP, C0, CN, M0, P0);                                                          \
        if (active && (t + 3 <= count)) (CP) = __ldg(ps + o3);                                     \
        STENCIL_ADVANCE(M0, P0);                                                                   \
    } while (0)

// 5-slot ring: the free slot CF (plane t-2, dead) receives plane t+3 before the compute.
#define STENCIL_STEP5(CF, CP, C0, CN, M0, P0)                                                      \
    do {                                                                                           \
        if (active && (t + 3 <= count)) (CF) = __ldg(ps + o3);                                     \
        STENCIL_BODY(CP, C0, CN, M0, P0);                                                          \
        STENCIL_ADVANCE(M0, P0);                                                                   \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Vectorised fused kernel. 1-D block of 256 threads: tx = tid % BX (k chunk), ty = tid / BX (j row).
// 3-D grid: x = k-block, y = j-block, z = i-chunk (same linear order as before).
// BXT > 0: compile-time power-of-two BX; BXT == 0: runtime BX / BY.
// IT: index type for the uint4 offsets (int when the volume fits in 2^31 uint4s).
// ---------------------------------------------------------------------------------------------
template <int BXT, typename IT>
__global__ void __launch_bounds__(256, 4)
stencil_3d_bf16_vec8(__nv_bfloat16* __restrict__ u_new, const __nv_bfloat16* __restrict__ u_old,
                     float r, int nx, int ny, int nzc, int BXr, int BYr, int IC) {
    static_assert(BXT >= 0 && (BXT & (BXT - 1)) == 0 && BXT <= 32, "BXT must be 0 or a power of 2");
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int BX = (BXT > 0) ? BXT : BXr;
    const int BY = (BXT > 0) ? (256 / (BXT > 0 ? BXT : 1)) : BYr;
    int tx, ty;
    if (BXT > 0) {
        tx = tid & ((BXT > 0 ? BXT : 1) - 1);
        ty = tid / (BXT > 0 ? BXT : 1);
    } else {
        tx = tid % BXr;
        ty = tid / BXr;
    }

    const int kc = (int)blockIdx.x * BX + tx;
    const int j = (int)blockIdx.y * BY + ty;
    const int ic = (int)blockIdx.z;
    const bool active = (BXT > 0 || ty < BY) && (kc < nzc) && (j < ny);
    const bool comp = active && (j >= 1) && (j <= ny - 2);

    // block's plane range [i0, i1]; interior planes [ia, ib]; march length = count
    const int i0 = ic * IC;
    const int i1 = min(i0 + IC, nx) - 1;
    const int ia = max(i0, 1);
    const int ib = min(i1, nx - 2);
    const int count = ib - ia + 1;  // block-uniform, may be <= 0
    const bool down = (ic & 1) != 0;

    const uint4* __restrict__ src = reinterpret_cast<const uint4*>(u_old);
    uint4* __restrict__ dst = reinterpret_cast<uint4*>(u_new);

    const IT sjv = (IT)nzc;              // j stride in uint4 units
    const IT siv = (IT)ny * (IT)nzc;     // i stride in uint4 units
    const IT col = active ? ((IT)j * sjv + (IT)kc) : (IT)0;
    const IT strd = down ? -siv : siv;
    const int start = down ? ib : ia;
    const IT soff = (count > 0) ? ((IT)start * siv + col) : col;
    const uint4* ps = src + soff;  // centre column of plane t of the march
    uint4* pd = dst + soff;

    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 A = z, B = z, C = z, D = z;      // centre ring: planes -1, 0, 1, 2
#ifdef RING5
    uint4 E = z;                           // fifth (free) centre slot
#endif
    uint4 MA = z, MB = z, PA = z, PB = z;  // j-1 / j+1 rings

    // ---- prologue: every load the first two steps need, issued before anything waits ----
    if (count > 0) {
        if (active) {
            A = __ldg(ps - strd);  // plane t = -1 (ia-1 upward, ib+1 downward)
            B = __ldg(ps);         // t = 0
            C = __ldg(ps + strd);  // t = 1
            if (count >= 2) D = __ldg(ps + 2 * strd);  // t = 2
        }
        if (comp) {
            MA = __ldg(ps - sjv);
            PA = __ldg(ps + sjv);
            if (count >= 2) {
                MB = __ldg(ps + strd - sjv);
                PB = __ldg(ps + strd + sjv);
            }
        }
    }

    // ---- peeled copy planes (i = 0 and i = nx-1), loads issued alongside the prologue ----
    if (active) {
        const bool cp0 = (i0 == 0);
        const bool cpN = (i1 == nx - 1) && (nx > 1);
        const IT offN = (IT)(nx - 1) * siv + col;
        uint4 v0 = z, vN = z;
        if (cp0) v0 = __ldg(src + col);
        if (cpN) vN = __ldg(src + offN);
        if (cp0) STORE_OUT(dst + col, v0);
        if (cpN) STORE_OUT(dst + offN, vN);
    }

    // ---- flags needed only by the march (after the loads have been issued) ----
    const bool hasL = (lane > 0) && (tx > 0);        // lane-1 holds chunk kc-1 of the same row
    const bool hasR = (lane < 31) && (tx < BX - 1);  // lane+1 holds chunk kc+1 of the same row
    const bool firstC = (kc == 0);
    const bool lastC = (kc == nzc - 1);
    const bool needL = comp && !hasL && !firstC;
    const bool needR = comp && !hasR && !lastC;

    // ---- the march over interior planes ----
    if (count > 0) {
        const IT o3 = 3 * strd;        // centre column, plane t+3
        const IT oM = 2 * strd - sjv;  // j-1 row, plane t+2
        const IT oP = 2 * strd + sjv;  // j+1 row, plane t+2
        int t = 0;
        int n = count;
#ifndef RING5
        while (n >= 4) {
            STENCIL_STEP(A, B, C, MA, PA);
            STENCIL_STEP(B, C, D, MB, PB);
            STENCIL_STEP(C, D, A, MA, PA);
            STENCIL_STEP(D, A, B, MB, PB);
            n -= 4;
        }
        if (n > 0) {
            STENCIL_STEP(A, B, C, MA, PA);
            if (n > 1) {
                STENCIL_STEP(B, C, D, MB, PB);
                if (n > 2) {
                    STENCIL_STEP(C, D, A, MA, PA);
                }
            }
        }
#else
        // ring [A,B,C,D,E]: plane p lives in slot (p+1) mod 5. Step s = t mod 5:
        // CF = slot s+4, CP = slot s, C0 = slot s+1, CN = slot s+2. M/P period 2 -> unroll 10.
        while (n >= 10) {
            STENCIL_STEP5(E, A, B, C, MA, PA);
            STENCIL_STEP5(A, B, C, D, MB, PB);
            STENCIL_STEP5(B, C, D, E, MA, PA);
            STENCIL_STEP5(C, D, E, A, MB, PB);
            STENCIL_STEP5(D, E, A, B, MA, PA);
            STENCIL_STEP5(E, A, B, C, MB, PB);
            STENCIL_STEP5(A, B, C, D, MA, PA);
            STENCIL_STEP5(B, C, D, E, MB, PB);
            STENCIL_STEP5(C, D, E, A, MA, PA);
            STENCIL_STEP5(D, E, A, B, MB, PB);
            n -= 10;
        }
        if (n > 0) STENCIL_STEP5(E, A, B, C, MA, PA);
        if (n > 1) STENCIL_STEP5(A, B, C, D, MB, PB);
        if (n > 2) STENCIL_STEP5(B, C, D, E, MA, PA);
        if (n > 3) STENCIL_STEP5(C, D, E, A, MB, PB);
        if (n > 4) STENCIL_STEP5(D, E, A, B, MA, PA);
        if (n > 5) STENCIL_STEP5(E, A, B, C, MB, PB);
        if (n > 6) STENCIL_STEP5(A, B, C, D, MA, PA);
        if (n > 7) STENCIL_STEP5(B, C, D, E, MB, PB);
        if (n > 8) STENCIL_STEP5(C, D, E, A, MA, PA);
#endif
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

template <int BXT, typename IT>
static bool run_vec(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                    int nzc, int BX) {
    static int bps = 0;
    if (bps <= 0) {
        int b = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, stencil_3d_bf16_vec8<BXT, IT>, 256, 0) !=
                cudaSuccess ||
            b <= 0) {
            (void)cudaGetLastError();
            b = 4;
        }
        if (b > 8) b = 8;
        bps = b;
    }
    const int BY = 256 / BX;
    const long long gxk = ((long long)nzc + BX - 1) / BX;
    const long long gy = ((long long)ny + BY - 1) / BY;
    if (gy > 65535 || gxk > 2147483647LL) return false;
    const long long base = gxk * gy;                                     // blocks per i plane
    const long long W = (long long)g_num_sms * (long long)bps;           // one full wave
    long long nic = W / base;
    if (nic < 1) nic = 1;
    if (nic > nx) nic = nx;
    const int IC = (int)((nx + nic - 1) / nic);
    nic = (nx + IC - 1) / IC;
    if (nic > 65535) return false;
    dim3 grid((unsigned int)gxk, (unsigned int)gy, (unsigned int)nic);
    stencil_3d_bf16_vec8<BXT, IT><<<grid, 256>>>(u_new, u_old, r, nx, ny, nzc, BX, BY, IC);
    return true;
}

template <typename IT>
static bool dispatch_vec(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx, int ny,
                         int nzc) {
    const int BX = nzc < 32 ? nzc : 32;
    if (BX == 32) return run_vec<32, IT>(u_new, u_old, r, nx, ny, nzc, BX);
    if (BX == 16) return run_vec<16, IT>(u_new, u_old, r, nx, ny, nzc, BX);
    if (BX == 8) return run_vec<8, IT>(u_new, u_old, r, nx, ny, nzc, BX);
    return run_vec<0, IT>(u_new, u_old, r, nx, ny, nzc, BX);
}

extern "C" void stencil_3d_bf16(__nv_bfloat16* u_new, const __nv_bfloat16* u_old, float r, int nx,
                                int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        const bool vec = (nz % 8 == 0) &&
                         ((((uintptr_t)u_new) | ((uintptr_t)u_old)) & (uintptr_t)15) == 0;
        bool done = false;
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
            const long long vol = (long long)nx * (long long)ny * (long long)nzc;  // uint4 units
            if (vol < 2147483647LL)
                done = dispatch_vec<int>(u_new, u_old, r, nx, ny, nzc);
            else
                done = dispatch_vec<long long>(u_new, u_old, r, nx, ny, nzc);
        }
        if (!done) {
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
