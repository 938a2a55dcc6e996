// Naive FP32 baseline: C[a][b][c] = sum_x sum_y A[a][x][b][y] * B[x][c][y], one thread per C
// element (256-thread blocks, c fastest), x in the outer loop and y inner, fp32 FMA. Unlike the
// original, the wrapper synchronises before returning.
#include <cuda_runtime.h>

__global__ void high_order_contraction_kernel(const float* A, const float* B, float* C, int a_dim,
                                              int b_dim, int c_dim, int x_dim, int y_dim) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t total = (size_t)a_dim * b_dim * c_dim;
    if (idx >= total) return;
    const int c = (int)(idx % c_dim);
    const int b = (int)((idx / c_dim) % b_dim);
    const int a = (int)(idx / ((size_t)c_dim * b_dim));
    float acc = 0.0f;
    for (int x = 0; x < x_dim; ++x) {
        const float* arow = A + (((size_t)a * x_dim + x) * b_dim + b) * y_dim;
        const float* brow = B + ((size_t)x * c_dim + c) * y_dim;
        for (int y = 0; y < y_dim; ++y) acc = fmaf(arow[y], brow[y], acc);
    }
    C[idx] = acc;
}

extern "C" void high_order_contraction(const float* A, const float* B, float* C, int a_dim,
                                       int b_dim, int c_dim, int x_dim, int y_dim) {
    const size_t total = (size_t)a_dim * b_dim * c_dim;
    if (total > 0) {
        const int threads = 256;
        const unsigned blocks = (unsigned)((total + threads - 1) / threads);
        high_order_contraction_kernel<<<blocks, threads>>>(A, B, C, a_dim, b_dim, c_dim, x_dim,
                                                           y_dim);
    }
    cudaDeviceSynchronize();
}
