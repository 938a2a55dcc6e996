// Naive FP32 baseline, structured as the original: four 1-float scratches cudaMalloc'd and freed
// every call, the two sums zeroed by host uploads, three kernels on a grid of at most 1024 x 256
// threads, and both divisions by N done on the host between kernels (each sum comes back with a
// device-to-host copy, the quotient goes up again with a host-to-device copy). The sums are
// per-thread grid-stride partials with one atomicAdd per thread, as the original.
#include <cuda_runtime.h>

__global__ void ln_sum_kernel(const float* x, float* sum, int N) {
    float acc = 0.0f;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride) {
        acc += x[i];
    }
    if (acc != 0.0f) atomicAdd(sum, acc);
}

__global__ void ln_sqdev_kernel(const float* x, const float* mean, float* sum, int N) {
    const float mu = *mean;
    float acc = 0.0f;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride) {
        const float d = x[i] - mu;
        acc = fmaf(d, d, acc);
    }
    if (acc != 0.0f) atomicAdd(sum, acc);
}

__global__ void ln_apply_kernel(float* out, const float* x, const float* w, const float* b,
                                const float* mean, const float* var, float eps, int N) {
    const float mu = *mean;
    const float sd = sqrtf(*var + eps);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride) {
        out[i] = w[i] * ((x[i] - mu) / sd) + b[i];
    }
}

extern "C" void layer_norm(float* output, const float* input, const float* weight,
                           const float* bias, const float epsilon, const int N) {
    if (N <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    float *sum_x = nullptr, *sum_sq = nullptr, *mean_d = nullptr, *var_d = nullptr;
    cudaMalloc(&sum_x, sizeof(float));
    cudaMalloc(&sum_sq, sizeof(float));
    cudaMalloc(&mean_d, sizeof(float));
    cudaMalloc(&var_d, sizeof(float));
    const float zero = 0.0f;
    cudaMemcpy(sum_x, &zero, sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(sum_sq, &zero, sizeof(float), cudaMemcpyHostToDevice);

    const int threads = 256;
    int blocks = (N + threads - 1) / threads;
    if (blocks > 1024) blocks = 1024;

    ln_sum_kernel<<<blocks, threads>>>(input, sum_x, N);
    cudaDeviceSynchronize();
    float h = 0.0f;
    cudaMemcpy(&h, sum_x, sizeof(float), cudaMemcpyDeviceToHost);
    const float mean = h / (float)N;  // on the host, as the original
    cudaMemcpy(mean_d, &mean, sizeof(float), cudaMemcpyHostToDevice);

    ln_sqdev_kernel<<<blocks, threads>>>(input, mean_d, sum_sq, N);
    cudaDeviceSynchronize();
    cudaMemcpy(&h, sum_sq, sizeof(float), cudaMemcpyDeviceToHost);
    const float var = h / (float)N;
    cudaMemcpy(var_d, &var, sizeof(float), cudaMemcpyHostToDevice);

    ln_apply_kernel<<<blocks, threads>>>(output, input, weight, bias, mean_d, var_d, epsilon, N);
    cudaDeviceSynchronize();

    cudaFree(sum_x);
    cudaFree(sum_sq);
    cudaFree(mean_d);
    cudaFree(var_d);
}
