// Naive FP32 baseline: one thread per output, out[i] = sum_{t<k} in[i+t]*ker[t] (valid
// cross-correlation, no kernel flip), accumulated in fp32 with ascending t (FMA-contracted).
#include <cuda_runtime.h>

__global__ void conv_1d_kernel(const float* in, const float* ker, float* out, int n_out, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_out) {
        float acc = 0.0f;
        for (int t = 0; t < k; ++t) acc += in[i + t] * ker[t];
        out[i] = acc;
    }
}

extern "C" void conv_1d(const float* input, const float* kernel, float* output, int input_size,
                        int kernel_size) {
    int n_out = input_size - kernel_size + 1;
    if (kernel_size > 0 && n_out > 0) {
        const int threads = 256;
        conv_1d_kernel<<<(n_out + threads - 1) / threads, threads>>>(input, kernel, output, n_out,
                                                                     kernel_size);
    }
    cudaDeviceSynchronize();
}
