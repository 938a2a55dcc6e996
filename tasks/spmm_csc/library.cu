// Library baseline: cuSPARSE generic SpMM on CSC (cusparseCreateConstCsc,
// CUSPARSE_SPMM_ALG_DEFAULT), row-major X and Y (CUSPARSE_ORDER_ROW), Y = 1*A*X + 1*Y, so it
// accumulates into the caller's Y exactly as the operator does. nnz is not passed: it is read
// back from col_offsets[columns] (a 4-byte device-to-host copy per call). Handle and work buffer
// are cached; the descriptors wrap the caller's pointers and are made per call.
#include <cstdio>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmm_csc library: %s failed: %s\n", what, cusparseGetErrorString(status));
    }
}

static cusparseHandle_t handle() {
    static cusparseHandle_t h = nullptr;
    if (!h) check(cusparseCreate(&h), "cusparseCreate");
    return h;
}

static void* workspace(size_t bytes) {
    static void* p = nullptr;
    static size_t have = 0;
    if (bytes > have) {
        if (p) cudaFree(p);
        cudaMalloc(&p, bytes);
        have = bytes;
    }
    return p;
}

extern "C" void spmm_csc(int rows, int columns, int K, const float* values, const int* row_indices,
                         const int* col_offsets, const float* X, float* Y) {
    if (rows <= 0 || columns <= 0 || K <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    int nnz = 0;
    cudaMemcpy(&nnz, col_offsets + columns, sizeof(int), cudaMemcpyDeviceToHost);
    cusparseConstSpMatDescr_t A;
    cusparseConstDnMatDescr_t B;
    cusparseDnMatDescr_t C;
    check(cusparseCreateConstCsc(&A, rows, columns, nnz, col_offsets, row_indices, values,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                 CUDA_R_32F),
          "cusparseCreateConstCsc");
    cusparseCreateConstDnMat(&B, columns, K, K, X, CUDA_R_32F, CUSPARSE_ORDER_ROW);
    cusparseCreateDnMat(&C, rows, K, K, Y, CUDA_R_32F, CUSPARSE_ORDER_ROW);
    const float one = 1.0f;
    const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
    size_t bytes = 0;
    check(cusparseSpMM_bufferSize(handle(), op, op, &one, A, B, &one, C, CUDA_R_32F,
                                  CUSPARSE_SPMM_ALG_DEFAULT, &bytes),
          "cusparseSpMM_bufferSize");
    check(cusparseSpMM(handle(), op, op, &one, A, B, &one, C, CUDA_R_32F,
                       CUSPARSE_SPMM_ALG_DEFAULT, workspace(bytes)),
          "cusparseSpMM");
    cusparseDestroySpMat(A);
    cusparseDestroyDnMat(B);
    cusparseDestroyDnMat(C);
    cudaDeviceSynchronize();
}
