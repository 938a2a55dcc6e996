// Library baseline: CUB DeviceTransform with our functor (no vendor library has SwiGLU). CUB
// supplies the launch (tiling, vectorised loads, occupancy) over the two input arrays; the
// functor does the math, in the baseline's order.
#include <cub/device/device_transform.cuh>
#include <cuda/std/tuple>
#include <cuda_runtime.h>
#include <math.h>

struct SwiGLUOp {
    float beta;
    __device__ float operator()(float g, float v) const {
        return g * (1.0f / (1.0f + expf(-beta * g))) * v;
    }
};

extern "C" void SwiGLU(float* output, const float* gate_input, const float* value_input,
                       float beta, int N) {
    if (N > 0)
        cub::DeviceTransform::Transform(cuda::std::make_tuple(gate_input, value_input), output, N,
                                        SwiGLUOp{beta});
    cudaDeviceSynchronize();
}
