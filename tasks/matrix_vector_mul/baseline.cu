// Naive FP32 baseline: y = A x, A row-major M x N. One thread per row (256-thread blocks), each
// summing A[m][n]*x[n] over ascending n with fp32 FMA.
#include <cuda_runtime.h>

__global__ void matrix_vector_mul_kernel(const float* A, const float* x, float* y, int M, int N) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float* a = A + (size_t)row * N;
    float acc = 0.0f;
    for (int n = 0; n < N; ++n) acc = fmaf(a[n], x[n], acc);
    y[row] = acc;
}

extern "C" void matrix_vector_mul(const float* A, const float* x, float* y, int M, int N) {
    if (M > 0) {
        const int threads = 256;
        matrix_vector_mul_kernel<<<(M + threads - 1) / threads, threads>>>(A, x, y, M, N);
    }
    cudaDeviceSynchronize();
}
