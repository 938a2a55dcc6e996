// Naive FP32 baseline: one block of 1024 threads with a strided loop, as the original.
#include <cuda_runtime.h>
#include <math.h>

__global__ void elu_kernel(float* output, const float* input, int N, float alpha) {
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        float x = input[i];
        output[i] = x < 0.0f ? alpha * (expf(x) - 1.0f) : x;
    }
}

extern "C" void elu(float* output, const float* input, const int N, float alpha) {
    elu_kernel<<<1, 1024>>>(output, input, N, alpha);
    cudaDeviceSynchronize();
}
