// Library baseline: cuSPARSE generic SpMM on COO (CUSPARSE_SPMM_COO_ALG4, the row-major
// algorithm), row-major X and Y (CUSPARSE_ORDER_ROW), Y = 1*A*X + 1*Y, so it accumulates into the
// caller's Y exactly as the operator does. The first parameter (unused by the baseline) carries
// the row count the descriptor needs. The column count is not passed: a small kernel finds the
// largest column index on the device (one 4-byte copy back per call) and X is declared with that
// many + 1 rows, all that the product reads. Handle, scratch and work buffer are cached; the
// descriptors wrap the caller's pointers and are made per call.
#include <cstdio>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmm_coo library: %s failed: %s\n", what, cusparseGetErrorString(status));
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

static int* extent_scratch() {
    static int* p = nullptr;
    if (!p) cudaMalloc(&p, sizeof(int));
    return p;
}

// *out = 1 + the largest index (out zeroed before)
__global__ void index_extent(int n, const int* index, int* out) {
    int top = 0;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long long)gridDim.x * blockDim.x) {
        top = max(top, index[j] + 1);
    }
    top = __reduce_max_sync(0xffffffffu, top);
    if ((threadIdx.x & 31) == 0) atomicMax(out, top);
}

extern "C" void spmm_coo(int row, int nnz, int K, const float* values, const int* row_indices,
                         const int* col_indices, const float* X, float* Y) {
    if (row <= 0 || nnz <= 0 || K <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    int* dev = extent_scratch();
    cudaMemsetAsync(dev, 0, sizeof(int));
    index_extent<<<264, 256>>>(nnz, col_indices, dev);
    int cols = 0;
    cudaMemcpy(&cols, dev, sizeof(int), cudaMemcpyDeviceToHost);
    cusparseConstSpMatDescr_t A;
    cusparseConstDnMatDescr_t B;
    cusparseDnMatDescr_t C;
    check(cusparseCreateConstCoo(&A, row, cols, nnz, row_indices, col_indices, values,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F),
          "cusparseCreateConstCoo");
    cusparseCreateConstDnMat(&B, cols, K, K, X, CUDA_R_32F, CUSPARSE_ORDER_ROW);
    cusparseCreateDnMat(&C, row, K, K, Y, CUDA_R_32F, CUSPARSE_ORDER_ROW);
    const float one = 1.0f;
    const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
    size_t bytes = 0;
    check(cusparseSpMM_bufferSize(handle(), op, op, &one, A, B, &one, C, CUDA_R_32F,
                                  CUSPARSE_SPMM_COO_ALG4, &bytes),
          "cusparseSpMM_bufferSize");
    check(cusparseSpMM(handle(), op, op, &one, A, B, &one, C, CUDA_R_32F, CUSPARSE_SPMM_COO_ALG4,
                       workspace(bytes)),
          "cusparseSpMM");
    cusparseDestroySpMat(A);
    cusparseDestroyDnMat(B);
    cusparseDestroyDnMat(C);
    cudaDeviceSynchronize();
}
