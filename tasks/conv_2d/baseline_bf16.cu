// Naive BF16 baseline: one thread per output (16x16 blocks); bf16 inputs widened to fp32, fp32
// accumulation with m outer and n inner, one rounding to bf16 at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void conv_2d_bf16_kernel(const __nv_bfloat16* in, const __nv_bfloat16* ker,
                                    __nv_bfloat16* out, int W, int kh, int kw, int Ho, int Wo) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < Ho && c < Wo) {
        float acc = 0.0f;
        for (int m = 0; m < kh; ++m) {
            const __nv_bfloat16* row = in + (size_t)(r + m) * W + c;
            for (int n = 0; n < kw; ++n)
                acc += __bfloat162float(row[n]) * __bfloat162float(ker[m * kw + n]);
        }
        out[(size_t)r * Wo + c] = __float2bfloat16(acc);
    }
}

extern "C" void conv_2d_bf16(const __nv_bfloat16* input, const __nv_bfloat16* kernel,
                             __nv_bfloat16* output, int input_rows, int input_cols,
                             int kernel_rows, int kernel_cols) {
    int Ho = input_rows - kernel_rows + 1, Wo = input_cols - kernel_cols + 1;
    if (kernel_rows > 0 && kernel_cols > 0 && Ho > 0 && Wo > 0) {
        dim3 block(16, 16);
        dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y);
        conv_2d_bf16_kernel<<<grid, block>>>(input, kernel, output, input_cols, kernel_rows,
                                             kernel_cols, Ho, Wo);
    }
    cudaDeviceSynchronize();
}
