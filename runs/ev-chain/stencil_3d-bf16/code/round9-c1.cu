// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
//
// Fast path (nz % 8 == 0, both pointers 16-byte aligned):
//   * one fused kernel writes both the interior and the six boundary faces;
//   * each thread owns one 16-byte chunk (8 consecutive k cells); the lanes of a warp cover
//     consecutive chunks of the same (i,j) row -> wide coalesced loads/stores;
//   * k-1 / k+1 halos come from the neighbouring lane by warp shuffle (scalar load only at
//     warp edges that are not k faces: never for nz <= 256);
//   * 2.5-D blocking: a block marches a chunk of i planes. ALL streams are software pipelined:
//     at step t (plane t of the march) the thread issues the centre column of plane t+3 and the
//     j-1 / j+1 rows of plane t+2, into a register ring (4 centre + 2 + 2 halo uint4 slots).
//     The loop is unrolled by the ring period (4) with a manual rotation (no rotation MOVs);
//   * the i = 0 and i = nx-1 copy planes are peeled out of the march, so the body has no i tests;
//   * odd i-chunks march downward, even chunks upward, so both blocks at a chunk boundary read
//     the shared halo planes at about the same time (L2 hits instead of late DRAM re-reads);
//   * arithmetic is fp32, same expression and order as the baseline (i-1 + i+1 is symmetric),
//     rounded once (RN) at the store.
//   * NEW (round 9): last-use eviction hint. An input row r of march plane p is read by this
//     block only: as the centre (warp r, step p-3), as the j+1 halo of warp r-1 and as the j-1
//     halo of warp r+1 (both step p-2). When r is inside the tile (1..BY-2) and p is not a
//     chunk-edge plane (1..count-2), nobody reads it afterwards. Its j-1 halo read is then issued
//     as ld.global.cg.L2::cache_hint with an evict_first policy, so the L2 victimises these clean
//     dead lines instead of dirty ones (no write-back inside the timed window). Values are
//     bit-identical; only cache bits change.
// Fallback (any other shape/alignment): fused, coalesced scalar kernel, one thread per cell.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

// Output store flavour (plan item 2): 0 = streaming (__stcs, default), 1 = plain store.
#ifndef STENCIL_PLAIN_STORES
#define STENCIL_PLAIN_STORES 0
#endif
#if STENCIL_PLAIN_STORES
#define ST_OUT(p, v) (*(p) = (v))
#else
#define ST_OUT(p, v) __stcs((p), (v))
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

// 16-byte load that bypasses L1 (.cg, so it always reaches L2) and carries an L2 cache policy.
static __device__ __forceinline__ uint4 ld_cg_hint(const uint4* p, uint64_t pol) {
    uint4 v;
    asm volatile("ld.global.cg.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(pol));
    return v;
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

// One plane step of the march. CP / C0 / CN: centre column at planes t-1, t, t+1 (march order);
// M0 / P0: j-1 / j+1 rows at plane t. After the compute, CP receives plane t+3 and M0 / P0
// receive plane t+2 (the slots that just died). The j-1 row of plane t+2 is that row's last
// use when plane t+2 is not a chunk-edge plane (t + 4 <= count) and the row is inside the tile
// (per-lane policy polM, warp-uniform branch warpHint).
#define STENCIL_STEP(CP, C0, CN, M0, P0)                                                           \
    do {                                                                                           \
        const uint32_t shL_ = __shfl_up_sync(FULL_MASK, (C0).w, 1);                                \
        const uint32_t shR_ = __shfl_down_sync(FULL_MASK, (C0).x, 1);                              \
        if (comp) {                                                                                \
            uint32_t l16_ = hasL ? (shL_ >> 16) : 0u;                                              \
            uint32_t r16_ = hasR ? (shR_ & 0xffffu) : 0u;                                          \
            if (needL) l16_ = (uint32_t)__ldg(reinterpret_cast<const unsigned short*>(ps) - 1);    \
            if (needR) r16_ = (uint32_t)__ldg(reinterpret_cast<const unsigned short*>(ps) + 8);    \
            ST_OUT(pd, stencil8((CP), (C0), (CN), (M0), (P0), l16_, r16_, r, firstC, lastC));      \
        } else if (active) {                                                                       \
            ST_OUT(pd, (C0));                                                                      \
        }                                                                                          \
        if (active && (t + 3 <= count)) (CP) = __ldg(ps + o3);                                     \
        if (comp && (t + 2 < count)) {                                                             \
            if (warpHint && (t + 4 <= count))                                                      \
                (M0) = ld_cg_hint(ps + oM, polM);                                                  \
            else                                                                                   \
                (M0) = __ldg(ps + oM);                                                             \
            (P0) = __ldg(ps + oP);                                                                 \
        }                                                                                          \
        ps += strd;                                                                                \
        pd += strd;                                                                                \
        ++t;                                                                                       \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Vectorised fused kernel. 1-D block of 256 threads: tx = tid % BX (k chunk), ty = tid / BX (j row).
// 1-D grid decoded as (k-block fastest, then j-block, then i-chunk).
// hintOK: rows are whole 128-byte lines and warps hold whole rows (nzc % 8 == 0, 32 % BX == 0).
// ---------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256, 4)
stencil_3d_bf16_vec8(__nv_bfloat16* __restrict__ u_new, const __nv_bfloat16* __restrict__ u_old,
                     float r, int nx, int ny, int nzc, int BX, int BY, int gxk, int gy, int IC,
                     int hintOK) {
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

    const bool hasL = (lane > 0) && (tx > 0);        // lane-1 holds chunk kc-1 of the same row
    const bool hasR = (lane < 31) && (tx < BX - 1);  // lane+1 holds chunk kc+1 of the same row
    const bool firstC = (kc == 0);
    const bool lastC = (kc == nzc - 1);
    const bool needL = comp && !hasL && !firstC;
    const bool needR = comp && !hasR && !lastC;

    // ---- last-use hint: which lanes' j-1 halo row is dead after this read ----
    // row ty-1 inside the tile (1..BY-2)  <=>  2 <= ty <= BY-1 (no other j-block reads it);
    // lines at a k-block edge are also read (scalar k halo) by the neighbouring k-block: skip them.
    const bool kDead = (kb == 0 || tx >= 8) && (kb == gxk - 1 || tx < BX - 8);
    const bool laneHint = (hintOK != 0) && comp && (ty >= 2) && (ty <= BY - 1) && kDead;
    const bool warpHint = __any_sync(FULL_MASK, laneHint);
    uint64_t polM = 0ull;
    if (warpHint) {
        uint64_t pe, pn;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pe));
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pn));
        polM = laneHint ? pe : pn;
    }

    // block's plane range [i0, i1]; interior planes [ia, ib]; march length = count
    const int i0 = ic * IC;
    const int i1 = min(i0 + IC, nx) - 1;
    const int ia = max(i0, 1);
    const int ib = min(i1, nx - 2);
    const int count = ib - ia + 1;  // block-uniform, may be <= 0
    const bool down = (ic & 1) != 0;

    const uint4* __restrict__ src = reinterpret_cast<const uint4*>(u_old);
    uint4* __restrict__ dst = reinterpret_cast<uint4*>(u_new);

    const long long sjv = (long long)nzc;               // j stride in uint4 units
    const long long siv = (long long)ny * (long long)nzc; // i stride in uint4 units
    const long long col = active ? ((long long)j * sjv + (long long)kc) : 0ll;

    const long long strd = down ? -siv : siv;
    const int start = down ? ib : ia;
    const long long soff = (count > 0) ? ((long long)start * siv + col) : col;
    const uint4* ps = src + soff;  // centre column of plane t of the march
    uint4* pd = dst + soff;

    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 A = z, B = z, C = z, D = z;      // centre ring
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
            MA = __ldg(ps - sjv);  // plane 0: chunk-edge plane, never hinted
            PA = __ldg(ps + sjv);
            if (count >= 2) {
                if (warpHint && count >= 3)  // plane 1 is dead when 1 <= count-2
                    MB = ld_cg_hint(ps + strd - sjv, polM);
                else
                    MB = __ldg(ps + strd - sjv);
                PB = __ldg(ps + strd + sjv);
            }
        }
    }

    // ---- peeled copy planes (i = 0 and i = nx-1), loads issued alongside the prologue ----
    if (active) {
        const bool cp0 = (i0 == 0);
        const bool cpN = (i1 == nx - 1) && (nx > 1);
        const long long offN = (long long)(nx - 1) * siv + col;
        uint4 v0 = z, vN = z;
        if (cp0) v0 = __ldg(src + col);
        if (cpN) vN = __ldg(src + offN);
        if (cp0) ST_OUT(dst + col, v0);
        if (cpN) ST_OUT(dst + offN, vN);
    }

    // ---- the march over interior planes ----
    if (count > 0) {
        const long long o3 = 3 * strd;        // centre column, plane t+3
        const long long oM = 2 * strd - sjv;  // j-1 row, plane t+2
        const long long oP = 2 * strd + sjv;  // j+1 row, plane t+2
        int t = 0;
        int n = count;
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
static int g_blocks_per_sm = 0;

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
            if (g_blocks_per_sm <= 0) {
                int bps = 0;
                if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, stencil_3d_bf16_vec8, 256, 0) !=
                        cudaSuccess ||
                    bps <= 0) {
                    (void)cudaGetLastError();
                    bps = 4;
                }
                if (bps > 8) bps = 8;
                g_blocks_per_sm = bps;
            }
            const int nzc = nz / 8;
            const int BX = nzc < 32 ? nzc : 32;
            const int BY = 256 / BX;
            const int gxk = (nzc + BX - 1) / BX;
            const int gy = (ny + BY - 1) / BY;
            const long long base = (long long)gxk * (long long)gy;                 // blocks per i plane
            const long long W = (long long)g_num_sms * (long long)g_blocks_per_sm;  // one full wave
            long long nic = W / base;
            if (nic < 1) nic = 1;
            if (nic > nx) nic = nx;
            const int IC = (int)((nx + nic - 1) / nic);
            nic = (nx + IC - 1) / IC;
            const long long blocks = base * nic;
            // hint only where a row is whole 128-byte lines and warps hold whole rows
            const int hintOK = ((nzc % 8) == 0 && (32 % BX) == 0) ? 1 : 0;
            stencil_3d_bf16_vec8<<<(unsigned int)blocks, 256>>>(u_new, u_old, r, nx, ny, nzc, BX, BY,
                                                                 gxk, gy, IC, hintOK);
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
