// Row-parallel BF16 softmax for sm_90a.
//  * C % 8 == 0 and 16-byte aligned pointers (all paper cases):
//      - C <= 1024   : one warp per row, row kept in registers (1..4 uint4 per lane),
//                      shuffle-only online (max, sum) reduction.
//      - C <= 32768  : one CTA per row, whole row issued up front as coalesced 16-byte
//                      ld.global.nc loads and kept in registers as packed bf16; one online
//                      (max, sum) block reduction (warp shuffles + one smem step, one barrier),
//                      output written straight from registers as 16-byte stores.
//      - larger C    : vectorized two-pass (online pass, then L2-hot re-read + write).
//  * anything else (odd C, misaligned pointers): coalesced scalar two-pass kernel.
// out = bf16(exp(x - M) * (1/S)) : a single rounding to bf16.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr uint32_t kNegInfBF2 = 0xFF80FF80u;  // two bf16 -inf values

__device__ __forceinline__ uint4 ld_nc_v4(const uint4* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x = lo (low half), .y = hi
    return *reinterpret_cast<uint32_t*>(&h);
}

// A max of -inf means "no finite contribution"; subtract 0 instead so exp(-inf - 0) = 0
// and we never form (-inf) - (-inf) = NaN.
__device__ __forceinline__ float safe_max(float m) { return (m == -INFINITY) ? 0.0f : m; }

// Merge two online-softmax partials (m, s) where s = sum exp(x - m).
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    const float M = fmaxf(m, m2);
    const float Ms = safe_max(M);
    s = s * expf(m - Ms) + s2 * expf(m2 - Ms);
    m = M;
}

// Fold one element into an online (m, s) partial.
__device__ __forceinline__ void online_add(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v);  // m == -inf -> s *= 0 (s is 0 then anyway)
        m = v;
    }
    s += expf(v - safe_max(m));
}

// Butterfly reduction: every lane ends with the identical result (fp add is commutative).
__device__ __forceinline__ void warp_reduce(float& m, float& s) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        combine(m, s, m2, s2);
    }
}

// Block reduction with a single barrier; every thread gets the result.
// red must hold at least nw entries (nw <= 32).
__device__ __forceinline__ void block_reduce(float& m, float& s, float2* red, int lane, int wid,
                                             int nw) {
    warp_reduce(m, s);
    if (lane == 0) red[wid] = make_float2(m, s);
    __syncthreads();
    const float2 p = (lane < nw) ? red[lane] : make_float2(-INFINITY, 0.0f);
    m = p.x;
    s = p.y;
    warp_reduce(m, s);
}

// Thread-local (max, sum) over V packed uint4 (8 bf16 each); padding is -inf.
template <int V>
__device__ __forceinline__ void local_stats(const uint32_t (&d)[V][4], float& m, float& s) {
    m = -INFINITY;
#pragma unroll
    for (int k = 0; k < V; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) m = fmaxf(m, fmaxf(bf_lo(d[k][j]), bf_hi(d[k][j])));
    const float ms = safe_max(m);
    s = 0.0f;
#pragma unroll
    for (int k = 0; k < V; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) s += expf(bf_lo(d[k][j]) - ms) + expf(bf_hi(d[k][j]) - ms);
}

__device__ __forceinline__ uint4 make_out(const uint32_t (&w)[4], float Ms, float inv) {
    uint4 o;
    o.x = pack_bf2(expf(bf_lo(w[0]) - Ms) * inv, expf(bf_hi(w[0]) - Ms) * inv);
    o.y = pack_bf2(expf(bf_lo(w[1]) - Ms) * inv, expf(bf_hi(w[1]) - Ms) * inv);
    o.z = pack_bf2(expf(bf_lo(w[2]) - Ms) * inv, expf(bf_hi(w[2]) - Ms) * inv);
    o.w = pack_bf2(expf(bf_lo(w[3]) - Ms) * inv, expf(bf_hi(w[3]) - Ms) * inv);
    return o;
}

// ---------------------------------------------------------------------------------------
// One warp per row, row in registers. Requires C % 8 == 0, 16B-aligned pointers,
// C/8 <= 32*V.
// ---------------------------------------------------------------------------------------
template <int V, int WPB>
__global__ void __launch_bounds__(WPB * 32)
    softmax_warp_reg(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                     int C) {
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;
    const int nvec = C >> 3;
    for (int row = blockIdx.x * WPB + wid; row < N; row += gridDim.x * WPB) {
        const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
        uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec;

        uint32_t d[V][4];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int i = lane + k * 32;
            uint4 v = make_uint4(kNegInfBF2, kNegInfBF2, kNegInfBF2, kNegInfBF2);
            if (i < nvec) v = ld_nc_v4(x + i);
            d[k][0] = v.x; d[k][1] = v.y; d[k][2] = v.z; d[k][3] = v.w;
        }

        float m, s;
        local_stats<V>(d, m, s);
        warp_reduce(m, s);

        const float Ms = safe_max(m);
        const float inv = 1.0f / s;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int i = lane + k * 32;
            if (i < nvec) y[i] = make_out(d[k], Ms, inv);
        }
    }
}

// ---------------------------------------------------------------------------------------
// One CTA per row, row in registers. Requires C % 8 == 0, 16B-aligned pointers,
// C/8 <= BS*V.
// ---------------------------------------------------------------------------------------
template <int BS, int V>
__global__ void __launch_bounds__(BS)
    softmax_block_reg(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                      int C) {
    constexpr int NW = BS / 32;
    __shared__ float2 red[NW];
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int wid = tid >> 5;
    const int nvec = C >> 3;

    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
        uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec;

        uint32_t d[V][4];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int i = tid + k * BS;
            uint4 v = make_uint4(kNegInfBF2, kNegInfBF2, kNegInfBF2, kNegInfBF2);
            if (i < nvec) v = ld_nc_v4(x + i);
            d[k][0] = v.x; d[k][1] = v.y; d[k][2] = v.z; d[k][3] = v.w;
        }

        float m, s;
        local_stats<V>(d, m, s);
        block_reduce(m, s, red, lane, wid, NW);

        const float Ms = safe_max(m);
        const float inv = 1.0f / s;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int i = tid + k * BS;
            if (i < nvec) y[i] = make_out(d[k], Ms, inv);
        }
        if (row + (int)gridDim.x < N) __syncthreads();  // protect red[] before reuse
    }
}

// ---------------------------------------------------------------------------------------
// Generic two-pass kernel (any C / alignment when VEC == false; C % 8 == 0 and aligned
// when VEC == true). Pass 1: online (max, sum); pass 2: re-read (L2-hot) and write.
// blockDim.x must be a multiple of 32, <= 1024.
// ---------------------------------------------------------------------------------------
template <bool VEC>
__global__ void __launch_bounds__(1024)
    softmax_generic(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in, int N,
                    int C) {
    __shared__ float2 red[32];
    const int tid = threadIdx.x;
    const int bs = blockDim.x;
    const int lane = tid & 31;
    const int wid = tid >> 5;
    const int nw = bs >> 5;

    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        float m = -INFINITY, s = 0.0f;
        if (VEC) {
            const int nvec = C >> 3;
            const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
            for (int i = tid; i < nvec; i += bs) {
                const uint4 v = ld_nc_v4(x + i);
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    online_add(m, s, bf_lo(w[j]));
                    online_add(m, s, bf_hi(w[j]));
                }
            }
        } else {
            const __nv_bfloat16* x = in + (size_t)row * C;
            for (int j = tid; j < C; j += bs) online_add(m, s, __bfloat162float(x[j]));
        }

        block_reduce(m, s, red, lane, wid, nw);
        const float Ms = safe_max(m);
        const float inv = 1.0f / s;

        if (VEC) {
            const int nvec = C >> 3;
            const uint4* x = reinterpret_cast<const uint4*>(in) + (size_t)row * nvec;
            uint4* y = reinterpret_cast<uint4*>(out) + (size_t)row * nvec;
            for (int i = tid; i < nvec; i += bs) {
                const uint4 v = ld_nc_v4(x + i);
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
                y[i] = make_out(w, Ms, inv);
            }
        } else {
            const __nv_bfloat16* x = in + (size_t)row * C;
            __nv_bfloat16* y = out + (size_t)row * C;
            for (int j = tid; j < C; j += bs)
                y[j] = __float2bfloat16_rn(expf(__bfloat162float(x[j]) - Ms) * inv);
        }
        if (row + (int)gridDim.x < N) __syncthreads();  // protect red[] before reuse
    }
}

template <int V>
inline void launch_warp(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    constexpr int WPB = 4;
    const int grid = (int)(((long long)N + WPB - 1) / WPB);
    softmax_warp_reg<V, WPB><<<grid, WPB * 32>>>(out, in, N, C);
}

template <int BS, int V>
inline void launch_block(__nv_bfloat16* out, const __nv_bfloat16* in, int N, int C) {
    softmax_block_reg<BS, V><<<N, BS>>>(out, in, N, C);
}

}  // namespace

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        const bool aligned =
            ((reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(input)) & 15u) == 0;
        if ((C & 7) == 0 && aligned) {
            const int nvec = C >> 3;
            if (nvec <= 32)        launch_warp<1>(out, input, N, C);        // C <= 256
            else if (nvec <= 64)   launch_warp<2>(out, input, N, C);        // C <= 512
            else if (nvec <= 128)  launch_warp<4>(out, input, N, C);        // C <= 1024
            else if (nvec <= 256)  launch_block<128, 2>(out, input, N, C);  // C <= 2048
            else if (nvec <= 512)  launch_block<256, 2>(out, input, N, C);  // C <= 4096
            else if (nvec <= 1024) launch_block<256, 4>(out, input, N, C);  // C <= 8192
            else if (nvec <= 2048) launch_block<512, 4>(out, input, N, C);  // C <= 16384
            else if (nvec <= 4096) launch_block<1024, 4>(out, input, N, C); // C <= 32768
            else softmax_generic<true><<<N, 1024>>>(out, input, N, C);
        } else {
            int threads = (C + 3) / 4;
            threads = (threads + 31) & ~31;
            if (threads < 32) threads = 32;
            if (threads > 1024) threads = 1024;
            softmax_generic<false><<<N, threads>>>(out, input, N, C);
        }
    }
    cudaDeviceSynchronize();
}
