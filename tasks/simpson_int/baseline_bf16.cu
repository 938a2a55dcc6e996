// Naive BF16 baseline: the FP32 panel kernel on widened bf16 samples, accumulating with atomics
// into a per-call fp32 scratch (allocated and zeroed every call, as the original); a one-thread
// kernel then overwrites the bf16 *result with bf(sum). For even N, y[N-1] is never read.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void simpson_bf16_kernel(const __nv_bfloat16* y, float* sum, float a, float b, int N) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long panels = (N - 1) / 2;
    if (t >= panels) return;
    float h = (b - a) / (float)(N - 1);
    long long i = 2 * t;
    float y0 = __bfloat162float(y[i]), y1 = __bfloat162float(y[i + 1]);
    float y2 = __bfloat162float(y[i + 2]);
    atomicAdd(sum, (h / 3.0f) * (y0 + 4.0f * y1 + y2));
}

__global__ void simpson_bf16_store(__nv_bfloat16* result, const float* sum) {
    *result = __float2bfloat16(*sum);
}

extern "C" void simpson_int_bf16(const __nv_bfloat16* y_samples, __nv_bfloat16* result, float a,
                                 float b, int N) {
    float* sum = nullptr;
    cudaMalloc(&sum, sizeof(float));
    cudaMemset(sum, 0, sizeof(float));
    long long panels = N >= 3 ? (N - 1) / 2 : 0;
    if (panels > 0) {
        simpson_bf16_kernel<<<(unsigned)((panels + 255) / 256), 256>>>(y_samples, sum, a, b, N);
    }
    simpson_bf16_store<<<1, 1>>>(result, sum);
    cudaFree(sum);
    cudaDeviceSynchronize();
}
