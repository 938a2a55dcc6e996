// Library baseline: CUB DeviceReduce::TransformReduce (fp32 terms -Y*logf(fmaxf(X, 1e-8f)),
// 0 where Y == 0; fp32 sum) into a cached device scratch float, then a one-thread kernel adds it
// to *loss (the accumulate contract). Scratch and CUB workspace are cached.
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <cuda_runtime.h>
#include <math.h>
#include <thrust/iterator/counting_iterator.h>

struct CrossEntropyTerm {
    const float* x;
    const float* y;
    __device__ float operator()(int i) const {
        const float yi = y[i];
        return yi != 0.0f ? -yi * logf(fmaxf(x[i], 1e-8f)) : 0.0f;
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

__global__ void ce_accumulate_kernel(float* loss, const float* sum) { *loss += *sum; }

extern "C" void cross_entropy_loss(float* loss, const float* X, const float* Y, const int C) {
    if (C > 0) {
        float* s = scratch();
        thrust::counting_iterator<int> first(0);
        size_t bytes = 0;
        cub::DeviceReduce::TransformReduce(nullptr, bytes, first, s, C, cuda::std::plus<float>{},
                                           CrossEntropyTerm{X, Y}, 0.0f);
        void* ws = workspace(bytes);
        cub::DeviceReduce::TransformReduce(ws, bytes, first, s, C, cuda::std::plus<float>{},
                                           CrossEntropyTerm{X, Y}, 0.0f);
        ce_accumulate_kernel<<<1, 1>>>(loss, s);
    }
    cudaDeviceSynchronize();
}
