// Library baseline: cuSPARSE generic SpMV (CSR, CUSPARSE_SPMV_CSR_ALG1) with bf16 values, x and
// y and fp32 compute (CUDA_R_32F), y = 1*A*x + 0*y. nnz is read back from row_offsets[rows]
// (a 4-byte device-to-host copy per call) and the column count is declared as INT_MAX, an upper
// bound on every column index. Handle and work buffer are cached; descriptors are per call.
#include <climits>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

static cusparseHandle_t handle() {
    static cusparseHandle_t h = nullptr;
    if (!h) cusparseCreate(&h);
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

extern "C" void spmv_csr_bf16(int rows, const __nv_bfloat16* values, const int* col_indices,
                              const int* row_offsets, const __nv_bfloat16* x, __nv_bfloat16* y) {
    if (rows <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    int nnz = 0;
    cudaMemcpy(&nnz, row_offsets + rows, sizeof(int), cudaMemcpyDeviceToHost);
    const int64_t cols = INT_MAX;
    cusparseConstSpMatDescr_t A;
    cusparseConstDnVecDescr_t vx;
    cusparseDnVecDescr_t vy;
    cusparseCreateConstCsr(&A, rows, cols, nnz, row_offsets, col_indices, values,
                           CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                           CUDA_R_16BF);
    cusparseCreateConstDnVec(&vx, cols, x, CUDA_R_16BF);
    cusparseCreateDnVec(&vy, rows, y, CUDA_R_16BF);
    const float one = 1.0f, zero = 0.0f;
    size_t bytes = 0;
    cusparseSpMV_bufferSize(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy,
                            CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG1, &bytes);
    cusparseSpMV(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_32F,
                 CUSPARSE_SPMV_CSR_ALG1, workspace(bytes));
    cusparseDestroySpMat(A);
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    cudaDeviceSynchronize();
}
