// Naive FP32 baseline: one block of 1024 threads with a strided loop, as the original.
#include <cuda_runtime.h>
#include <math.h>

__global__ void sigmoid_kernel(float* out, const float* input, int N) {
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        out[i] = 1.0f / (1.0f + expf(-input[i]));
    }
}

extern "C" void sigmoid(float* out, const float* input, const int N) {
    sigmoid_kernel<<<1, 1024>>>(out, input, N);
    cudaDeviceSynchronize();
}
