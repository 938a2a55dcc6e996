// Library baseline: CUB DeviceReduce::TransformReduce (fp32 products of widened bf16 pairs,
// fp32 sum) into a cached device scratch float, then a one-thread kernel adds it to *loss.
// cublasDotEx is not used: for bf16 inputs it returns a bf16 result, which would round the
// fp32 loss.
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>

struct PairProduct {
    const __nv_bfloat16* x;
    const __nv_bfloat16* y;
    __device__ float operator()(int i) const {
        return __bfloat162float(x[i]) * __bfloat162float(y[i]);
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

__global__ void accumulate_kernel(float* loss, const float* dot) { *loss += *dot; }

extern "C" void dot_product_bf16(float* loss, const __nv_bfloat16* X, const __nv_bfloat16* Y,
                                 const int N) {
    if (N > 0) {
        float* d = scratch();
        thrust::counting_iterator<int> first(0);
        size_t bytes = 0;
        cub::DeviceReduce::TransformReduce(nullptr, bytes, first, d, N, cuda::std::plus<float>{},
                                           PairProduct{X, Y}, 0.0f);
        void* ws = workspace(bytes);
        cub::DeviceReduce::TransformReduce(ws, bytes, first, d, N, cuda::std::plus<float>{},
                                           PairProduct{X, Y}, 0.0f);
        accumulate_kernel<<<1, 1>>>(loss, d);
    }
    cudaDeviceSynchronize();
}
