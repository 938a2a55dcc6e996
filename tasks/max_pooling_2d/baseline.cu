// Naive FP32 baseline: one thread per output on a (Wo/16, Ho/16, N*C) grid of 16x16 blocks (so
// N*C <= 65535). Each output is the max over the window's cells inside the image: padded cells
// are skipped, so they act as -inf; the max starts at -FLT_MAX, which an empty window keeps.
#include <cfloat>
#include <cuda_runtime.h>

__global__ void max_pool_kernel(const float* in, float* out, int H, int W, int Ho, int Wo, int k,
                                int stride, int pad) {
    int wo = blockIdx.x * blockDim.x + threadIdx.x;
    int ho = blockIdx.y * blockDim.y + threadIdx.y;
    int plane = blockIdx.z;  // n*C + c
    if (ho < Ho && wo < Wo) {
        int h0 = ho * stride - pad, w0 = wo * stride - pad;
        int hs = max(h0, 0), he = min(h0 + k, H);
        int ws = max(w0, 0), we = min(w0 + k, W);
        const float* src = in + (size_t)plane * H * W;
        float m = -FLT_MAX;
        for (int h = hs; h < he; ++h)
            for (int w = ws; w < we; ++w) m = fmaxf(m, src[(size_t)h * W + w]);
        out[((size_t)plane * Ho + ho) * Wo + wo] = m;
    }
}

extern "C" void max_pooling_2d(const float* input, float* output, int N, int C, int H, int W,
                               int kernel_size, int stride, int padding) {
    // Ho = floor((H + 2p - k)/s) + 1: no output when the padded image is smaller than k
    bool valid = kernel_size > 0 && stride > 0 && H + 2 * padding >= kernel_size &&
                 W + 2 * padding >= kernel_size && N > 0 && C > 0;
    int Ho = valid ? (H + 2 * padding - kernel_size) / stride + 1 : 0;
    int Wo = valid ? (W + 2 * padding - kernel_size) / stride + 1 : 0;
    if (Ho > 0 && Wo > 0) {
        dim3 block(16, 16);
        dim3 grid((Wo + block.x - 1) / block.x, (Ho + block.y - 1) / block.y, N * C);
        max_pool_kernel<<<grid, block>>>(input, output, H, W, Ho, Wo, kernel_size, stride,
                                         padding);
    }
    cudaDeviceSynchronize();
}
