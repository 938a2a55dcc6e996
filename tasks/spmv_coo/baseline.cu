// Naive FP32 baseline: one thread per stored entry, atomicAdd(y[row], value * x[col]) into the
// caller's y (accumulate contract: the harness zeroes y before every call).
#include <cuda_runtime.h>

__global__ void spmv_coo_kernel(int nnz, const float* values, const int* row_indices,
                                const int* col_indices, const float* x, float* y) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < nnz) atomicAdd(&y[row_indices[j]], values[j] * x[col_indices[j]]);
}

extern "C" void spmv_coo(int rows, int nnz, const float* values, const int* row_indices,
                         const int* col_indices, const float* x, float* y) {
    if (rows > 0 && nnz > 0) {
        const int threads = 256;
        const int blocks = (int)(((long long)nnz + threads - 1) / threads);
        spmv_coo_kernel<<<blocks, threads>>>(nnz, values, row_indices, col_indices, x, y);
    }
    cudaDeviceSynchronize();
}
