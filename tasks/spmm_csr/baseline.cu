// Naive FP32 baseline: one thread per output Y[r][k] (block = 256 consecutive k of one row r, so
// loads of X rows and stores of Y are coalesced), summing values[j] * X[col[j]][k] over the row
// in storage order with fp32 FMA; overwrites Y.
#include <cuda_runtime.h>

__global__ void spmm_csr_kernel(int K, const float* values, const int* col_indices,
                                const int* row_offsets, const float* X, float* Y) {
    const int r = blockIdx.x;
    const int k = blockIdx.y * blockDim.x + threadIdx.x;
    if (k < K) {
        float acc = 0.0f;
        const int end = row_offsets[r + 1];
        for (int j = row_offsets[r]; j < end; ++j) {
            acc = fmaf(values[j], X[(size_t)col_indices[j] * K + k], acc);
        }
        Y[(size_t)r * K + k] = acc;
    }
}

extern "C" void spmm_csr(int rows, int K, const float* values, const int* col_indices,
                         const int* row_offsets, const float* X, float* Y) {
    if (rows > 0 && K > 0) {
        const int threads = 256;
        const dim3 grid(rows, (K + threads - 1) / threads);
        spmm_csr_kernel<<<grid, threads>>>(K, values, col_indices, row_offsets, X, Y);
    }
    cudaDeviceSynchronize();
}
