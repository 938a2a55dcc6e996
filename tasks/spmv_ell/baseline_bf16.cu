// Naive BF16 baseline: one thread per row, all W slots in order, skipping padding (col == -1),
// fp32 FMA over widened values and x, one rounding at the store (an overwrite).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void spmv_ell_bf16_kernel(int rows, int width, const __nv_bfloat16* values,
                                     const int* col_ids, const __nv_bfloat16* x,
                                     __nv_bfloat16* y) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        const long long base = (long long)r * width;
        float acc = 0.0f;
        for (int s = 0; s < width; ++s) {
            const int c = col_ids[base + s];
            if (c != -1) {
                acc = fmaf(__bfloat162float(values[base + s]), __bfloat162float(x[c]), acc);
            }
        }
        y[r] = __float2bfloat16(acc);
    }
}

extern "C" void spmv_ell_bf16(int rows, int max_nnz_per_row, const __nv_bfloat16* values,
                              const int* col_ids, const __nv_bfloat16* x, __nv_bfloat16* y) {
    if (rows > 0) {
        const int threads = 256;
        spmv_ell_bf16_kernel<<<(rows + threads - 1) / threads, threads>>>(
            rows, max_nnz_per_row, values, col_ids, x, y);
    }
    cudaDeviceSynchronize();
}
