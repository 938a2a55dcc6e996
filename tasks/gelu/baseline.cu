// Naive FP32 baseline: one block of 1024 threads with a strided loop, as the original. Exact
// (erf) GELU; as in the original, the outer multiplies are done in double (0.5 is a double
// literal) and the result is rounded to float at the store.
#include <cuda_runtime.h>
#include <math.h>

__global__ void gelu_kernel(float* output, const float* input, int N) {
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        float x = input[i];
        float s = 1.0f + erff(x * 0.70710678118654752f);
        output[i] = (float)(0.5 * x * s);
    }
}

extern "C" void gelu(float* output, const float* input, const int N) {
    gelu_kernel<<<1, 1024>>>(output, input, N);
    cudaDeviceSynchronize();
}
