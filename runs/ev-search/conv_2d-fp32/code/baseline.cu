// Naive FP32 baseline: one thread per output (16x16 blocks), valid 2-D cross-correlation
// out[r][c] = sum_{m<kh} sum_{n<kw} in[r+m][c+n]*ker[m][n], m outer and n inner, accumulated in
// fp32 (FMA-contracted). The output row stride is W - kw + 1.
#include <cuda_runtime.h>

__global__ void conv_2d_kernel(const float* in, const float* ker, float* out, int W, int kh,
                               int kw, int Ho, int Wo) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < Ho && c < Wo) {
        float acc = 0.0f;
        for (int m = 0; m < kh; ++m) {
            const float* row = in + (size_t)(r + m) * W + c;
            for (int n = 0; n < kw; ++n) acc += row[n] * ker[m * kw + n];
        }
        out[(size_t)r * Wo + c] = acc;
    }
}

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    int Ho = input_rows - kernel_rows + 1, Wo = input_cols - kernel_cols + 1;
    if (kernel_rows > 0 && kernel_cols > 0 && Ho > 0 && Wo > 0) {
        dim3 block(16, 16);
        dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y);
        conv_2d_kernel<<<grid, block>>>(input, kernel, output, input_cols, kernel_rows,
                                        kernel_cols, Ho, Wo);
    }
    cudaDeviceSynchronize();
}
