// Library baseline: cublasSgemm in the default math mode (no TF32). cuBLAS is column-major:
// the row-major product C = A*B is the column-major C^T = B^T*A^T, so B goes first.
#include <cublas_v2.h>
#include <cuda_runtime.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (!h) {
        cublasCreate(&h);
        cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    }
    return h;
}

extern "C" void square_matrix_mul(float* A, float* B, float* C, int M) {
    const float one = 1.0f, zero = 0.0f;
    cublasSgemm(handle(), CUBLAS_OP_N, CUBLAS_OP_N, M, M, M, &one, B, M, A, M, &zero, C, M);
    cudaDeviceSynchronize();
}
