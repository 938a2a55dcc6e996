// Library baseline: CUB DeviceReduce::TransformReduce over the panel index t, each term
// (h/3)*(y_2t + 4*y_2t+1 + y_2t+2) on widened bf16 samples in fp32, summed in fp32 into a cached
// device scratch float; a one-thread kernel then overwrites the bf16 *result with bf(sum).
// For even N, y[N-1] is never read.
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>

struct PanelBf16 {
    const __nv_bfloat16* y;
    float h3;
    __device__ float operator()(int t) const {
        const __nv_bfloat16* p = y + 2 * (long long)t;
        return h3 * (__bfloat162float(p[0]) + 4.0f * __bfloat162float(p[1]) +
                     __bfloat162float(p[2]));
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

__global__ void store_kernel(__nv_bfloat16* result, const float* sum) {
    *result = __float2bfloat16(*sum);
}

extern "C" void simpson_int_bf16(const __nv_bfloat16* y_samples, __nv_bfloat16* result, float a,
                                 float b, int N) {
    const int panels = N >= 3 ? (N - 1) / 2 : 0;
    float* s = scratch();
    if (panels > 0) {
        const float h = (b - a) / (float)(N - 1);  // IEEE fp32 on the host, as on the device
        const PanelBf16 op{y_samples, h / 3.0f};
        thrust::counting_iterator<int> first(0);
        size_t bytes = 0;
        cub::DeviceReduce::TransformReduce(nullptr, bytes, first, s, panels,
                                           cuda::std::plus<float>{}, op, 0.0f);
        cub::DeviceReduce::TransformReduce(workspace(bytes), bytes, first, s, panels,
                                           cuda::std::plus<float>{}, op, 0.0f);
    } else {
        cudaMemsetAsync(s, 0, sizeof(float));
    }
    store_kernel<<<1, 1>>>(result, s);
    cudaDeviceSynchronize();
}
