// Naive FP32 baseline: one thread per output Y[r][k] (256 consecutive k of one row per block),
// all W slots of row r in order, skipping padding (col == -1), fp32 FMA; overwrites Y.
#include <cuda_runtime.h>

__global__ void spmm_ell_kernel(int width, int K, const float* values, const int* col_ids,
                                const float* X, float* Y) {
    const int r = blockIdx.x;
    const int k = blockIdx.y * blockDim.x + threadIdx.x;
    if (k < K) {
        const size_t base = (size_t)r * width;
        float acc = 0.0f;
        for (int s = 0; s < width; ++s) {
            const int c = col_ids[base + s];
            if (c != -1) acc = fmaf(values[base + s], X[(size_t)c * K + k], acc);
        }
        Y[(size_t)r * K + k] = acc;
    }
}

extern "C" void spmm_ell(int rows, int max_nnz_per_row, int K, const float* values,
                         const int* col_ids, const float* X, float* Y) {
    if (rows > 0 && K > 0) {
        const int threads = 256;
        const dim3 grid(rows, (K + threads - 1) / threads);
        spmm_ell_kernel<<<grid, threads>>>(max_nnz_per_row, K, values, col_ids, X, Y);
    }
    cudaDeviceSynchronize();
}
