// Naive FP32 baseline: grid-stride per-thread partial sums, one atomicAdd per thread into *loss
// (<= 1024 blocks x 256 threads). Like the original, terms with Y[i] == 0 are skipped.
#include <cuda_runtime.h>

__global__ void dot_product_kernel(float* loss, const float* X, const float* Y, int N) {
    float partial = 0.0f;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride) {
        const float y = Y[i];
        if (y != 0.0f) partial += X[i] * y;
    }
    atomicAdd(loss, partial);
}

extern "C" void dot_product(float* loss, const float* X, const float* Y, const int N) {
    if (N > 0) {
        const int threads = 256;
        int blocks = (N + threads - 1) / threads;
        if (blocks > 1024) blocks = 1024;
        dot_product_kernel<<<blocks, threads>>>(loss, X, Y, N);
    }
    cudaDeviceSynchronize();
}
