// SpMV CSR (fp32): y = A x.
// One 8-lane sub-warp per row (4 rows per warp), all loads of a row issued at once:
//   row_offsets (one coalesced load per warp + shfl) -> values/cols (16B aligned, masked
//   float4/int4 streaming loads) -> x gathers (__ldg, L1 resident) -> shfl_xor reduce.
// Rows longer than LONG_ROW nnz are skipped by their sub-warp and processed afterwards by the
// whole warp cooperatively (guards heavy-tailed / hub inputs). If values or col_indices are not
// 16-byte aligned, a scalar variant with the same structure is used.
#include <cuda_runtime.h>
#include <stdint.h>

#define SUB            8      // lanes per row
#define ROWS_PER_WARP  4      // 32 / SUB
#define THREADS        256
#define ROWS_PER_BLOCK (THREADS / SUB)
#define LONG_ROW       128    // rows longer than this go to the whole-warp phase
#define FULL_MASK      0xffffffffu

__device__ __forceinline__ float4 ld_stream_f4(const float* p) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::128B.v4.f32 {%0,%1,%2,%3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ int4 ld_stream_i4(const int* p) {
    int4 v;
    asm("ld.global.nc.L1::no_allocate.L2::128B.v4.s32 {%0,%1,%2,%3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ float ld_stream_f(const float* p) {
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ int ld_stream_i(const int* p) {
    int v;
    asm("ld.global.nc.L1::no_allocate.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

// Partial dot product of row [start, end) for lane `li` of a group of `gs` lanes.
template <bool VEC>
__device__ __forceinline__ float row_partial(const float* __restrict__ values,
                                             const int* __restrict__ cols,
                                             const float* __restrict__ x,
                                             int start, int end, int li, int gs) {
    float acc = 0.0f;
    if (VEC) {
        // 16B-aligned chunks; every chunk loaded contains at least one element of the row
        // (idx < end and idx + 3 >= start), so it never leaves the 16B block of a valid element.
        const int step = 4 * gs;
        for (int idx = (start & ~3) + 4 * li; idx < end; idx += step) {
            const float4 v = ld_stream_f4(values + idx);
            const int4   c = ld_stream_i4(cols + idx);
            if (idx >= start && idx + 3 < end) {
                const float x0 = __ldg(x + c.x);
                const float x1 = __ldg(x + c.y);
                const float x2 = __ldg(x + c.z);
                const float x3 = __ldg(x + c.w);
                acc = fmaf(v.x, x0, acc);
                acc = fmaf(v.y, x1, acc);
                acc = fmaf(v.z, x2, acc);
                acc = fmaf(v.w, x3, acc);
            } else {
                if (idx >= start)                      acc = fmaf(v.x, __ldg(x + c.x), acc);
                if (idx + 1 >= start && idx + 1 < end) acc = fmaf(v.y, __ldg(x + c.y), acc);
                if (idx + 2 >= start && idx + 2 < end) acc = fmaf(v.z, __ldg(x + c.z), acc);
                if (idx + 3 >= start && idx + 3 < end) acc = fmaf(v.w, __ldg(x + c.w), acc);
            }
        }
    } else {
#pragma unroll 4
        for (int j = start + li; j < end; j += gs) {
            const float v = ld_stream_f(values + j);
            const int   c = ld_stream_i(cols + j);
            acc = fmaf(v, __ldg(x + c), acc);
        }
    }
    return acc;
}

template <bool VEC>
__global__ void __launch_bounds__(THREADS, 8)
spmv_csr_subwarp_kernel(int rows, const float* __restrict__ values,
                        const int* __restrict__ col_indices,
                        const int* __restrict__ row_offsets,
                        const float* __restrict__ x, float* __restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int warp_global = (int)((blockIdx.x * (unsigned)THREADS + threadIdx.x) >> 5);
    const int row0 = warp_global * ROWS_PER_WARP;
    if (row0 >= rows) return;  // warp-uniform

    const int sub = lane >> 3;  // which row of the warp
    const int sl  = lane & 7;   // lane within the row group

    // One coalesced load of the warp's 5 row offsets, then broadcast.
    int off = 0;
    if (lane <= ROWS_PER_WARP && row0 + lane <= rows) off = __ldg(row_offsets + row0 + lane);
    int start = __shfl_sync(FULL_MASK, off, sub);
    int end   = __shfl_sync(FULL_MASK, off, sub + 1);

    const int  r     = row0 + sub;
    const bool valid = r < rows;
    if (!valid) end = start;
    const bool is_long = (end - start) > LONG_ROW;

    // Phase 1: short rows, one 8-lane group per row.
    float acc = 0.0f;
    if (!is_long) acc = row_partial<VEC>(values, col_indices, x, start, end, sl, SUB);
    acc += __shfl_xor_sync(FULL_MASK, acc, 4);
    acc += __shfl_xor_sync(FULL_MASK, acc, 2);
    acc += __shfl_xor_sync(FULL_MASK, acc, 1);
    if (sl == 0 && valid && !is_long) y[r] = acc;

    // Phase 2: long rows, whole warp cooperates on each.
    unsigned long_mask = __ballot_sync(FULL_MASK, is_long && sl == 0);
    while (long_mask) {  // warp-uniform
        const int leader = __ffs(long_mask) - 1;
        long_mask &= long_mask - 1;
        const int s = __shfl_sync(FULL_MASK, start, leader);
        const int e = __shfl_sync(FULL_MASK, end, leader);
        float a = row_partial<VEC>(values, col_indices, x, s, e, lane, 32);
        a += __shfl_xor_sync(FULL_MASK, a, 16);
        a += __shfl_xor_sync(FULL_MASK, a, 8);
        a += __shfl_xor_sync(FULL_MASK, a, 4);
        a += __shfl_xor_sync(FULL_MASK, a, 2);
        a += __shfl_xor_sync(FULL_MASK, a, 1);
        if (lane == 0) y[row0 + (leader >> 3)] = a;
    }
}

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        const int blocks = (rows - 1) / ROWS_PER_BLOCK + 1;
        const bool vec = ((reinterpret_cast<uintptr_t>(values) & 15u) == 0) &&
                         ((reinterpret_cast<uintptr_t>(col_indices) & 15u) == 0);
        if (vec)
            spmv_csr_subwarp_kernel<true><<<blocks, THREADS>>>(rows, values, col_indices,
                                                               row_offsets, x, y);
        else
            spmv_csr_subwarp_kernel<false><<<blocks, THREADS>>>(rows, values, col_indices,
                                                                row_offsets, x, y);
    }
    cudaDeviceSynchronize();
}
