// Naive FP32 baseline: one thread per column c, atomicAdd(y[row[j]], values[j] * x[c]) for each
// of its entries in storage order, into the caller's y (accumulate contract: the harness zeroes
// y before every call).
#include <cuda_runtime.h>

__global__ void spmv_csc_kernel(int columns, const float* values, const int* row_indices,
                                const int* col_offsets, const float* x, float* y) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < columns) {
        const float xc = x[c];
        const int end = col_offsets[c + 1];
        for (int j = col_offsets[c]; j < end; ++j) atomicAdd(&y[row_indices[j]], values[j] * xc);
    }
}

extern "C" void spmv_csc(int rows, int columns, const float* values, const int* row_indices,
                         const int* col_offsets, const float* x, float* y) {
    if (rows > 0 && columns > 0) {
        const int threads = 256;
        spmv_csc_kernel<<<(columns + threads - 1) / threads, threads>>>(
            columns, values, row_indices, col_offsets, x, y);
    }
    cudaDeviceSynchronize();
}
