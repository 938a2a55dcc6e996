// Naive BF16 baseline, as the original: a per-call fp32 scratch of rows*K floats (cudaMalloc +
// memset), one block per column and 256 consecutive k atomically adding the widened products
// there, then one rounding per output into Y (an overwrite) and cudaFree.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void spmm_csc_bf16_kernel(int K, const __nv_bfloat16* values, const int* row_indices,
                                     const int* col_offsets, const __nv_bfloat16* X, float* acc) {
    const int c = blockIdx.x;
    const int k = blockIdx.y * blockDim.x + threadIdx.x;
    if (k < K) {
        const float xc = __bfloat162float(X[(size_t)c * K + k]);
        const int end = col_offsets[c + 1];
        for (int j = col_offsets[c]; j < end; ++j) {
            atomicAdd(&acc[(size_t)row_indices[j] * K + k], __bfloat162float(values[j]) * xc);
        }
    }
}

__global__ void spmm_csc_bf16_store(size_t n, const float* acc, __nv_bfloat16* Y) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) Y[i] = __float2bfloat16(acc[i]);
}

extern "C" void spmm_csc_bf16(int rows, int columns, int K, const __nv_bfloat16* values,
                              const int* row_indices, const int* col_offsets,
                              const __nv_bfloat16* X, __nv_bfloat16* Y) {
    if (rows > 0 && K > 0) {
        const int threads = 256;
        const size_t n = (size_t)rows * K;
        float* acc = nullptr;
        cudaMalloc(&acc, n * sizeof(float));
        cudaMemset(acc, 0, n * sizeof(float));
        if (columns > 0) {
            const dim3 grid(columns, (K + threads - 1) / threads);
            spmm_csc_bf16_kernel<<<grid, threads>>>(K, values, row_indices, col_offsets, X, acc);
        }
        spmm_csc_bf16_store<<<(unsigned)((n + threads - 1) / threads), threads>>>(n, acc, Y);
        cudaDeviceSynchronize();
        cudaFree(acc);
    }
    cudaDeviceSynchronize();
}
