// Library baseline: cuBLAS geam computes C = 1*A + 1*B on an N x 1 column.
#include <cublas_v2.h>
#include <cuda_runtime.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (!h) cublasCreate(&h);
    return h;
}

extern "C" void vector_add(const float* A, const float* B, float* C, int N) {
    const float one = 1.0f;
    cublasSgeam(handle(), CUBLAS_OP_N, CUBLAS_OP_N, N, 1, &one, A, N, &one, B, N, C, N);
    cudaDeviceSynchronize();
}
