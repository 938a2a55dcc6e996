// Library baseline: cublasSgemv. The row-major M x N matrix A is, to column-major cuBLAS, the
// N x M matrix A^T with lda = N; y = (A^T)^T x is CUBLAS_OP_T with m = N, n = M.
#include <cublas_v2.h>
#include <cuda_runtime.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (!h) cublasCreate(&h);
    return h;
}

extern "C" void matrix_vector_mul(const float* A, const float* x, float* y, int M, int N) {
    const float one = 1.0f, zero = 0.0f;
    cublasSgemv(handle(), CUBLAS_OP_T, N, M, &one, A, N, x, 1, &zero, y, 1);
    cudaDeviceSynchronize();
}
