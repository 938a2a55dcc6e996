// stencil_3d (bf16): one Jacobi step of the 3-D 7-point stencil, boundary copied bit for bit.
//
// Fast path (nz % 8 == 0, both pointers 16-byte aligned):
//   * one fused kernel that writes both the interior and the six boundary faces;
//   * each thread owns one 16-byte chunk (8 consecutive k cells); lanes of a warp cover consecutive
//     chunks of the same (i,j) row, so every load/store is a wide coalesced access;
//   * k-1 / k+1 halos come from the neighbouring lane by warp shuffle (scalar load only at
//     warp or tile edges);
//   * 2.5-D blocking: each block walks a chunk of i planes; planes i-1 and i are kept as fp32 in
//     registers (each plane is unpacked once), i+1 / i+2 raw, plane i+3 is prefetched;
//   * L2 policy: outputs use plain stores (stay dirty in L2, no evict-first); every load whose line
//     no other block will read later gets an L2 evict_first hint (L1 allocation unchanged), so the
//     clean, already-used read lines become the L2 victims instead of dirty lines;
//   * i = 0 / nx-1 planes are peeled out of the loop; j / k faces are branch-free selects;
//   * arithmetic fp32: c + r*(sum - 6c) folded as fmaf(r, s, fmaf(-6r, c, c)), rounded once (RN).
// Fallback (any other shape/alignment): fused, coalesced scalar kernel, one thread per cell.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

// 1: 512-thread tiles (BY = 16 rows for nzc >= 32, 32 rows for nzc = 16); 0: 256-thread tiles.
#ifndef STENCIL_TALL_TILES
#define STENCIL_TALL_TILES 1
#endif
// 1: issue the j+-1 row loads of plane i+1 one iteration ahead (+8 live registers).
#ifndef STENCIL_PREISSUE_J
#define STENCIL_PREISSUE_J 0
#endif

#define FULL_MASK 0xffffffffu

static __device__ __forceinline__ float bf_lo(uint32_t v) { return __uint_as_float(v << 16); }
static __device__ __forceinline__ float bf_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

static __device__ __forceinline__ void unpack8(const uint4 v, float (&f)[8]) {
    f[0] = bf_lo(v.x); f[1] = bf_hi(v.x);
    f[2] = bf_lo(v.y); f[3] = bf_hi(v.y);
    f[4] = bf_lo(v.z); f[5] = bf_hi(v.z);
    f[6] = bf_lo(v.w); f[7] = bf_hi(v.w);
}

// Round two floats to bf16 (RN) and pack: low half = a, high half = b.
static __device__ __forceinline__ uint32_t pack_bf2(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
}

// Exact bit re-pack of two floats that were produced from bf16 bits (<< 16): low = lo, high = hi.
static __device__ __forceinline__ uint32_t repack_bits(float lo, float hi) {
    return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}

static __device__ __forceinline__ uint64_t make_evict_first_policy() {
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

// 16-byte read-only load; ef != 0: L2 evict_first hint (L1 behaviour unchanged), else default.
static __device__ __forceinline__ uint4 ld_v4(const uint4* p, uint64_t pol, bool ef) {
    uint4 v;
    asm volatile(
        "{\n\t"
        ".reg .pred q;\n\t"
        "setp.ne.b32 q, %5, 0;\n\t"
        "@q  ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %6;\n\t"
        "@!q ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n\t"
        "}"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "r"((int)ef), "l"(pol));
    return v;
}

// ---------------------------------------------------------------------------------------------
// Vectorised fused kernel. 1-D block of NT threads: tx = tid % BX (k chunk), ty = tid / BX (j row).
// 1-D grid decoded as (k-block fastest, then j-block, then i-chunk).
// ---------------------------------------------------------------------------------------------
template <int NT>
__global__ void __launch_bounds__(NT, (NT >= 512 ? 2 : 4))
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
    const int i1 = min(i0 + IC, nx) - 1;  // inclusive
    const int ia = max(i0, 1);            // first interior plane of this chunk
    const int ib = min(i1, nx - 2);       // last interior plane of this chunk

    const uint4* __restrict__ src = reinterpret_cast<const uint4*>(u_old);
    uint4* __restrict__ dst = reinterpret_cast<uint4*>(u_new);

    const size_t sjv = (size_t)nzc;               // j stride in uint4 units
    const size_t siv = (size_t)ny * (size_t)nzc;  // i stride in uint4 units
    const size_t col = active ? ((size_t)j * sjv + (size_t)kc) : (size_t)0;

    const uint4* const scol = src + col;
    uint4* const dcol = dst + col;

    // plane ia-1: the i-1 neighbour of the first interior plane (plane 0 when i0 == 0).
    // Normal L2 policy: it is re-read (chunk ic-1's last plane / this chunk's plane i0).
    const uint4 pmR = __ldg(scol + (size_t)(ia - 1) * siv);
    if (active && i0 == 0) dcol[0] = pmR;  // i == 0 face: verbatim copy

    if (ia <= ib) {  // block-uniform
        const bool jint = active && (j >= 1) && (j <= ny - 2);
        const bool hasL = (lane > 0) && (tx > 0);        // lane-1 holds chunk kc-1 of the same row
        const bool hasR = (lane < 31) && (tx < BX - 1);  // lane+1 holds chunk kc+1 of the same row
        const bool firstC = (kc == 0);
        const bool lastC = (kc == nzc - 1);
        const bool needL = jint && !hasL && !firstC;
        const bool needR = jint && !hasR && !lastC;

        // L2 policy classes. Tile-edge rows are re-read by the j-neighbour block (normal policy);
        // interior-row march lines are read by nobody else afterwards (evict_first).
        const bool edgeRow = (ty == 0) || (ty == BY - 1);
        const bool efMarch = !edgeRow;
        const bool efJm = (ty != 1);       // jm of ty==1 targets in-tile edge row 0
        const bool efJp = (ty != BY - 2);  // jp of ty==BY-2 targets in-tile edge row BY-1
        const ptrdiff_t offm = jint ? -(ptrdiff_t)sjv : (ptrdiff_t)0;
        const ptrdiff_t offp = jint ? (ptrdiff_t)sjv : (ptrdiff_t)0;

        const uint64_t pol = make_evict_first_policy();
        const float m6r = -6.0f * r;
        const size_t siv2 = 2 * siv, siv3 = 3 * siv;
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);

        float pmF[8], cF[8];
        unpack8(pmR, pmF);

        const uint4* pc = scol + (size_t)ia * siv;  // plane i, this column
        uint4* pd = dcol + (size_t)ia * siv;

        // plane ia: plane i0 (normal) unless i0 == 0, then plane 1 (march class).
        unpack8(ld_v4(pc, pol, (ia != i0) && efMarch), cF);
        uint4 n1R = ld_v4(pc + siv, pol, (ia + 1 > i1) || efMarch);
        uint4 n2R = z;
        if (ia + 2 <= ib + 1) n2R = ld_v4(pc + siv2, pol, (ia + 2 > i1) || efMarch);
#if STENCIL_PREISSUE_J
        uint4 jmR, jpR;
        {
            const bool h0 = (ia != i0);  // plane i0 keeps the normal policy
            jmR = ld_v4(pc + offm, pol, h0 && efJm);
            jpR = ld_v4(pc + offp, pol, h0 && efJp);
        }
#endif

        for (int i = ia; i <= ib; ++i) {
            // march prefetch: plane i+3 (becomes the i+1 neighbour two iterations later)
            uint4 n3 = z;
            if (i + 3 <= ib + 1) n3 = ld_v4(pc + siv3, pol, (i + 3 > i1) || efMarch);

#if STENCIL_PREISSUE_J
            uint4 jmN = z, jpN = z;
            if (i < ib) {
                jmN = ld_v4(pc + siv + offm, pol, efJm);
                jpN = ld_v4(pc + siv + offp, pol, efJp);
            }
#else
            const bool hf = (i != i0);
            const uint4 jmR = ld_v4(pc + offm, pol, hf && efJm);
            const uint4 jpR = ld_v4(pc + offp, pol, hf && efJp);
#endif

            // k halos at warp / tile edges (only when a row does not fit in a warp's lanes)
            float sl = 0.0f, sr = 0.0f;
            {
                const unsigned short* s16 = reinterpret_cast<const unsigned short*>(pc);
                if (needL) sl = __uint_as_float(((uint32_t)__ldg(s16 - 1)) << 16);
                if (needR) sr = __uint_as_float(((uint32_t)__ldg(s16 + 8)) << 16);
            }

            // all lanes of the warp execute these (loop trip count is block-uniform)
            const float shL = __shfl_up_sync(FULL_MASK, cF[7], 1);
            const float shR = __shfl_down_sync(FULL_MASK, cF[0], 1);
            const float kl = hasL ? shL : sl;
            const float kr = hasR ? shR : sr;

            float nF[8], jmF[8], jpF[8];
            unpack8(n1R, nF);
            unpack8(jmR, jmF);
            unpack8(jpR, jpF);

            float res[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const float km = (e == 0) ? kl : cF[e - 1];
                const float kp = (e == 7) ? kr : cF[e + 1];
                const float s = ((pmF[e] + nF[e]) + (jmF[e] + jpF[e])) + (km + kp);
                res[e] = fmaf(r, s, fmaf(m6r, cF[e], cF[e]));
            }

            uint4 cpy;
            cpy.x = repack_bits(cF[0], cF[1]);
            cpy.y = repack_bits(cF[2], cF[3]);
            cpy.z = repack_bits(cF[4], cF[5]);
            cpy.w = repack_bits(cF[6], cF[7]);

            uint4 o;
            o.x = pack_bf2(res[0], res[1]);
            o.y = pack_bf2(res[2], res[3]);
            o.z = pack_bf2(res[4], res[5]);
            o.w = pack_bf2(res[6], res[7]);
            if (firstC) o.x = (o.x & 0xffff0000u) | (cpy.x & 0x0000ffffu);  // k == 0 face
            if (lastC) o.w = (o.w & 0x0000ffffu) | (cpy.w & 0xffff0000u);   // k == nz-1 face
            if (!jint) o = cpy;                                             // j faces
            if (active) *pd = o;  // plain store: stays dirty in L2

#pragma unroll
            for (int e = 0; e < 8; ++e) {
                pmF[e] = cF[e];
                cF[e] = nF[e];
            }
            n1R = n2R;
            n2R = n3;
#if STENCIL_PREISSUE_J
            jmR = jmN;
            jpR = jpN;
#endif
            pc += siv;
            pd += siv;
        }
    }

    // i == nx-1 face: verbatim copy (nx == 1 was handled as plane 0 above)
    if (active && i1 == nx - 1 && nx >= 2) {
        const size_t q = (size_t)(nx - 1) * siv;
        dcol[q] = __ldg(scol + q);
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
            const int BX = nzc < 32 ? nzc : 32;
            const bool tall = (STENCIL_TALL_TILES != 0) && (nzc >= 16);
            const int NT = tall ? 512 : 256;
            const int bps = tall ? 2 : 4;  // resident blocks per SM
            const int BY = NT / BX;
            const int gxk = (nzc + BX - 1) / BX;
            const int gy = (ny + BY - 1) / BY;
            const long long base = (long long)gxk * (long long)gy;  // blocks per i plane
            const long long W = (long long)g_num_sms * bps;          // one wave
            long long nic = W / base;
            if (nic < 1) nic = 1;
            if (nic > nx) nic = nx;
            const int IC = (int)((nx + nic - 1) / nic);
            nic = (nx + IC - 1) / IC;
            const long long blocks = base * nic;
            if (tall)
                stencil_3d_bf16_vec8<512><<<(unsigned int)blocks, 512>>>(u_new, u_old, r, nx, ny, nzc,
                                                                          BX, BY, gxk, gy, IC);
            else
                stencil_3d_bf16_vec8<256><<<(unsigned int)blocks, 256>>>(u_new, u_old, r, nx, ny, nzc,
                                                                          BX, BY, gxk, gy, IC);
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
