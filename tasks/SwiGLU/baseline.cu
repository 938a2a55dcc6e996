// Naive FP32 baseline: the original's grid of ceil(N/256) blocks x 256 threads, one element per
// thread: out = g * (1/(1 + exp(-beta*g))) * v. (The original's loop strided from threadIdx.x by
// blockDim.x in every block, so each block recomputed the whole vector; see semantics_note.)
#include <cuda_runtime.h>
#include <math.h>

__global__ void swiglu_kernel(float* out, const float* gate, const float* value, float beta,
                              int N) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float g = gate[i];
        out[i] = g * (1.0f / (1.0f + expf(-beta * g))) * value[i];
    }
}

extern "C" void SwiGLU(float* output, const float* gate_input, const float* value_input,
                       float beta, int N) {
    if (N > 0) {
        const int threads = 256;
        swiglu_kernel<<<(N + threads - 1) / threads, threads>>>(output, gate_input, value_input,
                                                               beta, N);
    }
    cudaDeviceSynchronize();
}
