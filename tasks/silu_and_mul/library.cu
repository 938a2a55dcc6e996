// Library baseline: CUB DeviceTransform with our functor. No vendor library has this op; CUB
// supplies the launch (tiling, vectorisation, occupancy) over a counting iterator of output
// indices, and the functor maps index i to row b = i / D, column d = i % D.
#include <cub/device/device_transform.cuh>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <thrust/iterator/counting_iterator.h>

template <typename Index>
struct SiluMul {
    const float* in;
    Index D;
    __device__ float operator()(Index i) const {
        Index b = i / D, d = i - b * D;
        const float* row = in + (size_t)b * 2 * D;
        float v = row[d];
        return v / (1.0f + expf(-v)) * row[D + d];
    }
};

template <typename Index>
static void run(const float* in, float* out, Index n, Index D) {
    cub::DeviceTransform::Transform(thrust::counting_iterator<Index>(0), out, n,
                                    SiluMul<Index>{in, D});
}

extern "C" void silu_and_mul(const float* in, float* out, int32_t B, int32_t D) {
    int64_t n = (int64_t)B * D;
    if (n > 0) {
        // 32-bit index arithmetic whenever the whole input fits it
        if (2 * n <= INT32_MAX)
            run<int32_t>(in, out, (int32_t)n, D);
        else
            run<int64_t>(in, out, n, (int64_t)D);
    }
    cudaDeviceSynchronize();
}
