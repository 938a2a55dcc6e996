// Naive BF16 baseline, as the original: a per-call fp32 scratch of rows floats (cudaMalloc +
// memset), one thread per column atomically adding its widened products there, then one
// rounding per row into y (an overwrite) and cudaFree.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void spmv_csc_bf16_kernel(int columns, const __nv_bfloat16* values,
                                     const int* row_indices, const int* col_offsets,
                                     const __nv_bfloat16* x, float* acc) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < columns) {
        const float xc = __bfloat162float(x[c]);
        const int end = col_offsets[c + 1];
        for (int j = col_offsets[c]; j < end; ++j) {
            atomicAdd(&acc[row_indices[j]], __bfloat162float(values[j]) * xc);
        }
    }
}

__global__ void spmv_csc_bf16_store(int rows, const float* acc, __nv_bfloat16* y) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) y[r] = __float2bfloat16(acc[r]);
}

extern "C" void spmv_csc_bf16(int rows, int columns, const __nv_bfloat16* values,
                              const int* row_indices, const int* col_offsets,
                              const __nv_bfloat16* x, __nv_bfloat16* y) {
    if (rows > 0) {
        const int threads = 256;
        float* acc = nullptr;
        cudaMalloc(&acc, (size_t)rows * sizeof(float));
        cudaMemset(acc, 0, (size_t)rows * sizeof(float));
        if (columns > 0) {
            spmv_csc_bf16_kernel<<<(columns + threads - 1) / threads, threads>>>(
                columns, values, row_indices, col_offsets, x, acc);
        }
        spmv_csc_bf16_store<<<(rows + threads - 1) / threads, threads>>>(rows, acc, y);
        cudaDeviceSynchronize();
        cudaFree(acc);
    }
    cudaDeviceSynchronize();
}
