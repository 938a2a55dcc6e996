// Library baseline: CUB DeviceReduce::TransformReduce of the baseline's fp32 terms
// (b - a)*y_i/N, summed in fp32 into a cached device scratch float; a one-thread kernel then
// adds it to *result (the accumulate contract).
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <cuda_runtime.h>

struct Term {
    float width;  // b - a, rounded to fp32 as in the baseline
    float n;
    __device__ float operator()(float y) const { return width * y / n; }
};

static float* scratch() {
    static float* p = nullptr;
    if (!p) cudaMalloc(&p, sizeof(float));
    return p;
}

static void* workspace(size_t bytes) {
    static void* p = nullptr;
    static size_t have = 0;
    if (bytes > have) {
        if (p) cudaFree(p);
        cudaMalloc(&p, bytes);
        have = bytes;
    }
    return p;
}

__global__ void accumulate_kernel(float* result, const float* sum) { *result += *sum; }

extern "C" void monte_carlo_int(const float* y_samples, float* result, float a, float b, int N) {
    if (N > 0) {
        const Term op{b - a, (float)N};
        float* s = scratch();
        size_t bytes = 0;
        cub::DeviceReduce::TransformReduce(nullptr, bytes, y_samples, s, N,
                                           cuda::std::plus<float>{}, op, 0.0f);
        cub::DeviceReduce::TransformReduce(workspace(bytes), bytes, y_samples, s, N,
                                           cuda::std::plus<float>{}, op, 0.0f);
        accumulate_kernel<<<1, 1>>>(result, s);
    }
    cudaDeviceSynchronize();
}
