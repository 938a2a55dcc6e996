// Naive FP32 baseline, two kernels as the original: (1) sum of squares into a 1-float scratch
// that is cudaMalloc'd, zeroed and freed every call; (2) out = w*(x/rms) + b with
// rms = sqrt(s/N + eps), a true division. Kernel 1 keeps per-thread grid-stride partials,
// reduces them per block in shared memory and does one atomicAdd per block (<= 1024 blocks):
// one atomic per element, as a tiny-N kernel might do, stalls in fp32 for N >= 2^24.
#include <cuda_runtime.h>

__global__ void rms_sumsq_kernel(const float* x, float* sum, int N) {
    __shared__ float part[256];
    float acc = 0.0f;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride) {
        acc = fmaf(x[i], x[i], acc);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(sum, part[0]);
}

__global__ void rms_apply_kernel(float* out, const float* x, const float* w, const float* b,
                                 const float* sum, float eps, int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float rms = sqrtf(*sum / (float)N + eps);
        out[i] = w[i] * (x[i] / rms) + b[i];
    }
}

extern "C" void rms_norm(float* output, const float* input, const float* weight, const float* bias,
                         const float epsilon, const int N) {
    if (N <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    float* sum = nullptr;
    cudaMalloc(&sum, sizeof(float));
    cudaMemset(sum, 0, sizeof(float));
    const int threads = 256;  // rms_sumsq_kernel's shared array assumes 256
    int blocks = (N + threads - 1) / threads;
    rms_sumsq_kernel<<<blocks < 1024 ? blocks : 1024, threads>>>(input, sum, N);
    rms_apply_kernel<<<blocks, threads>>>(output, input, weight, bias, sum, epsilon, N);
    cudaDeviceSynchronize();
    cudaFree(sum);
}
