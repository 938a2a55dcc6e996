// Naive BF16 baseline: one thread per output Y[r][k] (256 consecutive k of one row per block),
// fp32 FMA over widened values and X in storage order, one rounding at the store (overwrite).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void spmm_csr_bf16_kernel(int K, const __nv_bfloat16* values, const int* col_indices,
                                     const int* row_offsets, const __nv_bfloat16* X,
                                     __nv_bfloat16* Y) {
    const int r = blockIdx.x;
    const int k = blockIdx.y * blockDim.x + threadIdx.x;
    if (k < K) {
        float acc = 0.0f;
        const int end = row_offsets[r + 1];
        for (int j = row_offsets[r]; j < end; ++j) {
            acc = fmaf(__bfloat162float(values[j]),
                       __bfloat162float(X[(size_t)col_indices[j] * K + k]), acc);
        }
        Y[(size_t)r * K + k] = __float2bfloat16(acc);
    }
}

extern "C" void spmm_csr_bf16(int rows, int K, const __nv_bfloat16* values, const int* col_indices,
                              const int* row_offsets, const __nv_bfloat16* X, __nv_bfloat16* Y) {
    if (rows > 0 && K > 0) {
        const int threads = 256;
        const dim3 grid(rows, (K + threads - 1) / threads);
        spmm_csr_bf16_kernel<<<grid, threads>>>(K, values, col_indices, row_offsets, X, Y);
    }
    cudaDeviceSynchronize();
}
