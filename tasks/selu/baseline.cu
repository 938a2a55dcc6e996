// Naive FP32 baseline: one block of 1024 threads with a strided loop, as the original. The
// constants are whatever the caller passes (the harness: alpha = 1.67, lambda = 1.0).
#include <cuda_runtime.h>
#include <math.h>

__global__ void selu_kernel(float* output, const float* input, int N, float alpha, float lambda) {
    const float scale_neg = lambda * alpha;
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        float x = input[i];
        output[i] = x < 0.0f ? scale_neg * (expf(x) - 1.0f) : lambda * x;
    }
}

extern "C" void selu(float* output, const float* input, const int N, float alpha, float lambda) {
    selu_kernel<<<1, 1024>>>(output, input, N, alpha, lambda);
    cudaDeviceSynchronize();
}
