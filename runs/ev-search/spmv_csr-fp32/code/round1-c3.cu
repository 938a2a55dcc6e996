// SpMV CSR fp32: warp-level nnz-parallel processing, loads issued up front,
// segmented warp sums via shuffles (no atomics), one launch + sync on the host.
#include <cuda_runtime.h>
#include <climits>

// Streaming loads for col_indices / values (read once): non-coherent path, no L1 allocation.
__device__ __forceinline__ int ld_stream_s32(const int* p) {
    int r;
    asm("ld.global.nc.L1::no_allocate.s32 %0, [%1];" : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ float ld_stream_f32(const float* p) {
    float r;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(r) : "l"(p));
    return r;
}

// Each warp owns W consecutive rows [r0, r0+nr). It covers the nonzero span
// [off[r0], off[r0+nr]) in chunks of 32*U: slot i of a chunk holds k = cbase + 32*i + lane.
// Lane j (< nr) keeps row r0+j's sum in a register.
template <int W, int U>
__global__ void __launch_bounds__(128, 8)
spmv_csr_warp_kernel(int rows, const float* __restrict__ values,
                     const int* __restrict__ col_indices,
                     const int* __restrict__ row_offsets,
                     const float* __restrict__ x, float* __restrict__ y) {
    const unsigned FULL = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long r0ll = warp * W;
    if (r0ll >= rows) return;                       // warp-uniform
    const int r0 = (int)r0ll;
    const int nr = min(W, rows - r0);               // 1..W rows in this warp

    // One coalesced load of the nr+1 offsets; lanes past nr hold INT_MAX.
    int o = INT_MAX;
    if (lane <= nr) o = __ldg(row_offsets + r0 + lane);
    const int start  = __shfl_sync(FULL, o, 0);
    const int end    = __shfl_sync(FULL, o, nr);
    const int o_next = __shfl_down_sync(FULL, o, 1);   // off[r0+lane+1] for lanes < nr
    const bool own = lane < nr;
    const bool row_nonempty = own && (o < o_next);

    float acc = 0.0f;

    for (int cbase = start; cbase < end; cbase += 32 * U) {
        // 1) Issue all column / value loads of this chunk.
        int   c[U];
        float v[U];
#pragma unroll
        for (int i = 0; i < U; ++i) {
            const int k = cbase + 32 * i + lane;
            c[i] = 0;
            v[i] = 0.0f;
            if (k < end) {
                c[i] = ld_stream_s32(col_indices + k);
                v[i] = ld_stream_f32(values + k);
            }
        }
        // 2) Issue all x gathers (read-only path, x stays L1/L2 resident).
        float xv[U];
#pragma unroll
        for (int i = 0; i < U; ++i) {
            const int k = cbase + 32 * i + lane;
            xv[i] = 0.0f;
            if (k < end) xv[i] = __ldg(x + c[i]);
        }
        // 3) Segmented warp sums per slot; each row's owner lane collects its piece.
#pragma unroll
        for (int i = 0; i < U; ++i) {
            const int sbase = cbase + 32 * i;
            if (sbase < end) {                      // warp-uniform
                float p = v[i] * xv[i];             // 0 for lanes past the span

                // Segment heads: every row start (and the span end) that falls inside
                // this 32-wide slot, plus lane 0.
                const unsigned d = (unsigned)(o - sbase);
                const unsigned bit = (d < 32u) ? (1u << d) : 0u;
                const unsigned heads = __reduce_or_sync(FULL, bit) | 1u;
                const unsigned above = heads & ~((2u << lane) - 1u);   // heads after lane
                const int segend = above ? (__ffs(above) - 2) : 31;

                // Segmented suffix sum: p[lane] = sum over [lane, segend].
#pragma unroll
                for (int s = 1; s < 32; s <<= 1) {
                    const float q = __shfl_down_sync(FULL, p, s);
                    if (lane + s <= segend) p += q;
                }

                // Row r0+lane's piece in this slot starts at lane h (its head).
                const int h = max(o - sbase, 0);
                const float seg = __shfl_sync(FULL, p, h & 31);
                if (row_nonempty && h < 32 && o_next > sbase) acc += seg;
            }
        }
    }

    if (own) y[r0 + lane] = acc;                    // empty rows write 0
}

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        const int threads = 128;                    // 4 warps per block
        const int warps_per_block = threads / 32;
        if (rows <= 4096) {
            constexpr int W = 4, U = 4;
            const long long warps  = (long long)(rows - 1) / W + 1;
            const long long blocks = (warps + warps_per_block - 1) / warps_per_block;
            spmv_csr_warp_kernel<W, U><<<(unsigned)blocks, threads>>>(
                rows, values, col_indices, row_offsets, x, y);
        } else {
            constexpr int W = 8, U = 8;
            const long long warps  = (long long)(rows - 1) / W + 1;
            const long long blocks = (warps + warps_per_block - 1) / warps_per_block;
            spmv_csr_warp_kernel<W, U><<<(unsigned)blocks, threads>>>(
                rows, values, col_indices, row_offsets, x, y);
        }
    }
    cudaDeviceSynchronize();
}
