// Vector CSR SpMV (fp32): a group of L lanes per row (L = 32/16/8 picked from the row count),
// coalesced row-offset load per warp, 4x-unrolled gather loop with independent loads in
// flight, shuffle-xor reduction inside the group, group lane 0 writes y.
#include <cuda_runtime.h>

#define SPMV_BLOCK 128

__device__ __forceinline__ float ld_stream_f32(const float* p) {
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ int ld_stream_s32(const int* p) {
    int v;
    asm("ld.global.nc.L1::no_allocate.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

template <int L>
__global__ void __launch_bounds__(SPMV_BLOCK)
spmv_csr_vector_kernel(int rows, const float* __restrict__ values,
                       const int* __restrict__ col_indices,
                       const int* __restrict__ row_offsets,
                       const float* __restrict__ x, float* __restrict__ y) {
    constexpr int ROWS_PER_WARP = 32 / L;
    const int lane = threadIdx.x & 31;
    const long long warp_global =
        ((long long)blockIdx.x * SPMV_BLOCK + threadIdx.x) >> 5;
    const long long row0_ll = warp_global * ROWS_PER_WARP;
    const int row0 = row0_ll < (long long)rows ? (int)row0_ll : rows;

    // Coalesced load of the warp's ROWS_PER_WARP + 1 offsets (clamped to rows, which is valid).
    int o = 0;
    if (lane <= ROWS_PER_WARP) {
        int idx = row0 + lane;
        if (idx > rows) idx = rows;
        o = __ldg(row_offsets + idx);
    }
    const int g = lane / L;        // group index within the warp
    const int gl = lane & (L - 1); // lane within the group
    const int start = __shfl_sync(0xffffffffu, o, g);
    const int end = __shfl_sync(0xffffffffu, o, g + 1);
    const int r = row0 + g;

    float acc0 = 0.0f, acc1 = 0.0f;
    int j = start + gl;

    // Main loop: 4 elements per lane per iteration, all col/value loads first, then gathers.
    for (; j + 3 * L < end; j += 4 * L) {
        const int c0 = ld_stream_s32(col_indices + j);
        const int c1 = ld_stream_s32(col_indices + j + L);
        const int c2 = ld_stream_s32(col_indices + j + 2 * L);
        const int c3 = ld_stream_s32(col_indices + j + 3 * L);
        const float v0 = ld_stream_f32(values + j);
        const float v1 = ld_stream_f32(values + j + L);
        const float v2 = ld_stream_f32(values + j + 2 * L);
        const float v3 = ld_stream_f32(values + j + 3 * L);
        const float x0 = __ldg(x + c0);
        const float x1 = __ldg(x + c1);
        const float x2 = __ldg(x + c2);
        const float x3 = __ldg(x + c3);
        acc0 = fmaf(v0, x0, acc0);
        acc1 = fmaf(v1, x1, acc1);
        acc0 = fmaf(v2, x2, acc0);
        acc1 = fmaf(v3, x3, acc1);
    }
    // Tail: up to 3 more elements per lane, predicated, loads issued before gathers.
    if (j < end) {
        const bool p1 = (j + L) < end;
        const bool p2 = (j + 2 * L) < end;
        const int c0 = ld_stream_s32(col_indices + j);
        const int c1 = p1 ? ld_stream_s32(col_indices + j + L) : 0;
        const int c2 = p2 ? ld_stream_s32(col_indices + j + 2 * L) : 0;
        const float v0 = ld_stream_f32(values + j);
        const float v1 = p1 ? ld_stream_f32(values + j + L) : 0.0f;
        const float v2 = p2 ? ld_stream_f32(values + j + 2 * L) : 0.0f;
        const float x0 = __ldg(x + c0);
        const float x1 = p1 ? __ldg(x + c1) : 0.0f;
        const float x2 = p2 ? __ldg(x + c2) : 0.0f;
        acc0 = fmaf(v0, x0, acc0);
        if (p1) acc1 = fmaf(v1, x1, acc1);
        if (p2) acc0 = fmaf(v2, x2, acc0);
    }

    float acc = acc0 + acc1;
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off, L);

    if (gl == 0 && r < rows) y[r] = acc;
}

template <int L>
static void launch_spmv(int rows, const float* values, const int* col_indices,
                        const int* row_offsets, const float* x, float* y) {
    const long long threads_total = (long long)rows * L;
    const long long blocks = (threads_total + SPMV_BLOCK - 1) / SPMV_BLOCK;
    spmv_csr_vector_kernel<L><<<(unsigned int)blocks, SPMV_BLOCK>>>(
        rows, values, col_indices, row_offsets, x, y);
}

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        if (rows <= 2048)
            launch_spmv<32>(rows, values, col_indices, row_offsets, x, y);
        else if (rows <= 8192)
            launch_spmv<16>(rows, values, col_indices, row_offsets, x, y);
        else
            launch_spmv<8>(rows, values, col_indices, row_offsets, x, y);
    }
    cudaDeviceSynchronize();
}
