// Naive FP32 baseline: one block of 1024 threads with a strided loop (as the original);
// negative inputs are scaled by alpha, the others copied.
#include <cuda_runtime.h>

__global__ void leaky_relu_kernel(float* output, const float* input, int N, float alpha) {
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        float x = input[i];
        output[i] = x < 0.0f ? alpha * x : x;
    }
}

extern "C" void leaky_RELU(float* output, const float* input, const int N,
                           float alpha = 0.01f) {
    if (N > 0) leaky_relu_kernel<<<1, 1024>>>(output, input, N, alpha);
    cudaDeviceSynchronize();
}
