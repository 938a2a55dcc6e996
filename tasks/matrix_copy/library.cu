// Library baseline: cublasScopy_64 over the M*N contiguous elements (unit strides).
#include <cublas_v2.h>
#include <cuda_runtime.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (!h) cublasCreate(&h);
    return h;
}

extern "C" void matrix_copy(float* A, float* B, int M, int N) {
    if (M > 0 && N > 0) cublasScopy_64(handle(), (int64_t)M * N, A, 1, B, 1);
    cudaDeviceSynchronize();
}
