// Naive FP32 baseline: one thread per row, all W slots of the row in order, skipping padding
// (col == -1), fp32 FMA; overwrites y.
#include <cuda_runtime.h>

__global__ void spmv_ell_kernel(int rows, int width, const float* values, const int* col_ids,
                                const float* x, float* y) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        const long long base = (long long)r * width;
        float acc = 0.0f;
        for (int s = 0; s < width; ++s) {
            const int c = col_ids[base + s];
            if (c != -1) acc = fmaf(values[base + s], x[c], acc);
        }
        y[r] = acc;
    }
}

extern "C" void spmv_ell(int rows, int max_nnz_per_row, const float* values, const int* col_ids,
                         const float* x, float* y) {
    if (rows > 0) {
        const int threads = 256;
        spmv_ell_kernel<<<(rows + threads - 1) / threads, threads>>>(rows, max_nnz_per_row,
                                                                     values, col_ids, x, y);
    }
    cudaDeviceSynchronize();
}
