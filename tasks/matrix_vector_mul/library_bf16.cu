// Library baseline: cublasGemmEx with n = 1: y (M x 1) = op_T(A^T) (M x N) * x (N x 1), bf16
// A/x/y, CUBLAS_COMPUTE_32F (fp32 accumulation, one rounding at the store). As for the FP32
// gemv, the row-major A is the column-major N x M matrix A^T with lda = N.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (!h) cublasCreate(&h);
    return h;
}

extern "C" void matrix_vector_mul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* x,
                                       __nv_bfloat16* y, int M, int N) {
    const float one = 1.0f, zero = 0.0f;
    cublasGemmEx(handle(), CUBLAS_OP_T, CUBLAS_OP_N, M, 1, N, &one, A, CUDA_R_16BF, N, x,
                 CUDA_R_16BF, N, &zero, y, CUDA_R_16BF, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaDeviceSynchronize();
}
