// Naive FP32 baseline: B = A^P by the original's schedule, R2 = A*A, then R_{k+1} = R_k*A for
// k = 2..P-1 (so P <= 2 gives A*A). Each product is the naive GEMM (one thread per output, 16x16
// blocks, ascending-k fp32 FMA). Like the original, every call allocates three N x N scratch
// buffers, copies A in, copies each new power back over the current one, and copies the result
// out; the copies use cudaMemcpyDefault on the caller's device pointers.
#include <cuda_runtime.h>

__global__ void matrix_power_step(const float* X, const float* Y, float* Z, int N) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= N || col >= N) return;
    const float* x = X + (size_t)row * N;
    const float* y = Y + col;
    float acc = 0.0f;
    for (int k = 0; k < N; ++k) acc = fmaf(x[k], y[(size_t)k * N], acc);
    Z[(size_t)row * N + col] = acc;
}

extern "C" void matrix_power(const float* A, float* B, int N, int P) {
    if (N > 0) {
        const size_t bytes = (size_t)N * N * sizeof(float);
        float *a = nullptr, *cur = nullptr, *next = nullptr;
        cudaMalloc(&a, bytes);
        cudaMalloc(&cur, bytes);
        cudaMalloc(&next, bytes);
        cudaMemcpy(a, A, bytes, cudaMemcpyDefault);
        dim3 block(16, 16);
        dim3 grid((N + 15) / 16, (N + 15) / 16);
        matrix_power_step<<<grid, block>>>(a, a, cur, N);
        for (int k = 2; k < P; ++k) {
            matrix_power_step<<<grid, block>>>(cur, a, next, N);
            cudaMemcpy(cur, next, bytes, cudaMemcpyDeviceToDevice);
        }
        cudaMemcpy(B, cur, bytes, cudaMemcpyDefault);
        cudaFree(a);
        cudaFree(cur);
        cudaFree(next);
    }
    cudaDeviceSynchronize();
}
