// Library baseline: CUB DeviceReduce::TransformReduce over the panel index t, each term
// (h/3)*(y_2t + 4*y_2t+1 + y_2t+2) with the baseline's fp32 arithmetic, summed in fp32 into a
// cached device scratch float; a one-thread kernel then adds it to *result (the accumulate
// contract). For even N, y[N-1] is never read.
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>

struct Panel {
    const float* y;
    float h3;
    __device__ float operator()(int t) const {
        const float* p = y + 2 * (long long)t;
        return h3 * (p[0] + 4.0f * p[1] + p[2]);
    }
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

extern "C" void simpson_int(const float* y_samples, float* result, float a, float b, int N) {
    const int panels = N >= 3 ? (N - 1) / 2 : 0;
    if (panels > 0) {
        const float h = (b - a) / (float)(N - 1);  // IEEE fp32 on the host, as on the device
        const Panel op{y_samples, h / 3.0f};
        float* s = scratch();
        thrust::counting_iterator<int> first(0);
        size_t bytes = 0;
        cub::DeviceReduce::TransformReduce(nullptr, bytes, first, s, panels,
                                           cuda::std::plus<float>{}, op, 0.0f);
        cub::DeviceReduce::TransformReduce(workspace(bytes), bytes, first, s, panels,
                                           cuda::std::plus<float>{}, op, 0.0f);
        accumulate_kernel<<<1, 1>>>(result, s);
    }
    cudaDeviceSynchronize();
}
