// Library baseline: cuSPARSE generic SpMV on COO (CUSPARSE_SPMV_COO_ALG1), y = 1*A*x + 1*y, so
// it accumulates into the caller's y exactly as the operator does. cols is not passed: it is
// declared as INT_MAX, an upper bound on every column index (non-transposed SpMV reads x only
// at stored columns). The handle and the work buffer are cached; the descriptors wrap the
// caller's pointers and are made per call.
#include <climits>
#include <cstdio>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmv_coo library: %s failed: %s\n", what, cusparseGetErrorString(status));
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

extern "C" void spmv_coo(int rows, int nnz, const float* values, const int* row_indices,
                         const int* col_indices, const float* x, float* y) {
    if (rows <= 0 || nnz <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    const int64_t cols = INT_MAX;
    cusparseConstSpMatDescr_t A;
    cusparseConstDnVecDescr_t vx;
    cusparseDnVecDescr_t vy;
    check(cusparseCreateConstCoo(&A, rows, cols, nnz, row_indices, col_indices, values,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F),
          "cusparseCreateConstCoo");
    cusparseCreateConstDnVec(&vx, cols, x, CUDA_R_32F);
    cusparseCreateDnVec(&vy, rows, y, CUDA_R_32F);
    const float one = 1.0f;
    size_t bytes = 0;
    check(cusparseSpMV_bufferSize(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &one,
                                  vy, CUDA_R_32F, CUSPARSE_SPMV_COO_ALG1, &bytes),
          "cusparseSpMV_bufferSize");
    check(cusparseSpMV(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &one, vy,
                       CUDA_R_32F, CUSPARSE_SPMV_COO_ALG1, workspace(bytes)),
          "cusparseSpMV");
    cusparseDestroySpMat(A);
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    cudaDeviceSynchronize();
}
