// Library baseline: no single library call does rms_norm with a bias. cublasSnrm2 (device
// pointer mode) writes ||x||_2 into a cached device scratch float, then one elementwise kernel
// computes rms = sqrt(nrm^2/N + eps) and out = w*(x/rms) + b.
#include <cublas_v2.h>
#include <cuda_runtime.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (!h) {
        cublasCreate(&h);
        cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE);
    }
    return h;
}

static float* scratch() {
    static float* p = nullptr;
    if (!p) cudaMalloc(&p, sizeof(float));
    return p;
}

__global__ void rms_apply_kernel(float* out, const float* x, const float* w, const float* b,
                                 const float* nrm, float eps, int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float rms = sqrtf(*nrm * *nrm / (float)N + eps);
        out[i] = w[i] * (x[i] / rms) + b[i];
    }
}

extern "C" void rms_norm(float* output, const float* input, const float* weight, const float* bias,
                         const float epsilon, const int N) {
    if (N > 0) {
        float* nrm = scratch();
        cublasSnrm2(handle(), N, input, 1, nrm);
        rms_apply_kernel<<<(N + 255) / 256, 256>>>(output, input, weight, bias, nrm, epsilon, N);
    }
    cudaDeviceSynchronize();
}
