// Naive FP32 baseline: one thread per output; each out[i] is its own sequential fp32 sum of
// in[0..i], starting from k = 0 (O(N^2) work, as the original).
#include <cuda_runtime.h>

__global__ void prefix_sum_kernel(float* output, const float* input, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float sum = 0.0f;
    for (int k = 0; k <= i; ++k) sum += input[k];
    output[i] = sum;
}

extern "C" void prefix_sum(float* output, const float* input, const int N) {
    if (N > 0) prefix_sum_kernel<<<(N + 255) / 256, 256>>>(output, input, N);
    cudaDeviceSynchronize();
}
