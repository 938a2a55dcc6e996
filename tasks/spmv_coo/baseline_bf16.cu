// Naive BF16 baseline, as the original: a per-call fp32 scratch of rows floats (cudaMalloc +
// memset), one thread per entry atomically adding the widened product there, then one rounding
// per row into y (an overwrite) and cudaFree.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void spmv_coo_bf16_kernel(int nnz, const __nv_bfloat16* values, const int* row_indices,
                                     const int* col_indices, const __nv_bfloat16* x, float* acc) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < nnz) {
        atomicAdd(&acc[row_indices[j]],
                  __bfloat162float(values[j]) * __bfloat162float(x[col_indices[j]]));
    }
}

__global__ void spmv_coo_bf16_store(int rows, const float* acc, __nv_bfloat16* y) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) y[r] = __float2bfloat16(acc[r]);
}

extern "C" void spmv_coo_bf16(int rows, int nnz, const __nv_bfloat16* values,
                              const int* row_indices, const int* col_indices,
                              const __nv_bfloat16* x, __nv_bfloat16* y) {
    if (rows > 0) {
        const int threads = 256;
        float* acc = nullptr;
        cudaMalloc(&acc, (size_t)rows * sizeof(float));
        cudaMemset(acc, 0, (size_t)rows * sizeof(float));
        if (nnz > 0) {
            const int blocks = (int)(((long long)nnz + threads - 1) / threads);
            spmv_coo_bf16_kernel<<<blocks, threads>>>(nnz, values, row_indices, col_indices, x,
                                                      acc);
        }
        spmv_coo_bf16_store<<<(rows + threads - 1) / threads, threads>>>(rows, acc, y);
        cudaDeviceSynchronize();
        cudaFree(acc);
    }
    cudaDeviceSynchronize();
}
