// Library baseline: cublasCopyEx_64 with x and y both CUDA_R_16BF over the M*N contiguous
// elements. cublasCopyEx is declared in cuBLAS 13's cublas_api.h; its bf16 support is not in
// the documentation we found, so a refusal is reported on stderr (B then stays unwritten and
// fails the check) rather than hidden behind a fallback.
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (!h) cublasCreate(&h);
    return h;
}

extern "C" void matrix_copy_bf16(__nv_bfloat16* A, __nv_bfloat16* B, int M, int N) {
    if (M > 0 && N > 0) {
        const cublasStatus_t s =
            cublasCopyEx_64(handle(), (int64_t)M * N, A, CUDA_R_16BF, 1, B, CUDA_R_16BF, 1);
        if (s != CUBLAS_STATUS_SUCCESS) {
            std::fprintf(stderr, "matrix_copy_bf16: cublasCopyEx_64 returned %d\n", (int)s);
        }
    }
    cudaDeviceSynchronize();
}
