// Library baseline: cuSPARSE generic SpMM on COO (CUSPARSE_SPMM_COO_ALG4, the row-major
// algorithm), row-major X and Y (CUSPARSE_ORDER_ROW), Y = 1*A*X + 1*Y, so it accumulates into the
// caller's Y exactly as the operator does. cuSPARSE's COO format assumes row order and these
// triplets are unsorted (passed as they are, they gave wrong sums on the GPU), so every call sorts
// a copy by row first, as a user of the library would have to: the indices are copied into cached
// scratch, cusparseXcoosortByRow sorts them and returns the permutation, and a small kernel
// gathers the values through it. Duplicates stay (SpMM sums them); the caller's arrays are not
// touched. The first parameter (unused by the baseline) carries the row count the descriptor
// needs. The column count is not passed: a small kernel finds the largest column index on the
// device (one 4-byte copy back per call) and X is declared with that many + 1 rows, all that the
// product reads. Handle, scratch and work buffers are cached; the descriptors wrap the sorted
// copy and the caller's X and Y, made per call.
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

static void* grow(void** p, size_t* have, size_t bytes) {
    if (bytes > *have) {
        if (*p) cudaFree(*p);
        cudaMalloc(p, bytes);
        *have = bytes;
    }
    return *p;
}

static void* workspace(size_t bytes) {
    static void* p = nullptr;
    static size_t have = 0;
    return grow(&p, &have, bytes);
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

__global__ void identity(int n, int* perm) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) perm[j] = (int)j;
}

__global__ void gather(int n, const int* perm, const float* in, float* out) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) out[j] = in[perm[j]];
}

struct SortedCoo {
    const int* rows;
    const int* cols;
    const float* values;
};

// A copy of the triplets in row order, in cached scratch that grows with nnz
static SortedCoo sort_by_row(int rows, int cols, int nnz, const float* values,
                             const int* row_indices, const int* col_indices) {
    static void *r = nullptr, *c = nullptr, *p = nullptr, *v = nullptr, *b = nullptr;
    static size_t have_r = 0, have_c = 0, have_p = 0, have_v = 0, have_b = 0;
    const size_t index_bytes = (size_t)nnz * sizeof(int);
    int* sorted_rows = (int*)grow(&r, &have_r, index_bytes);
    int* sorted_cols = (int*)grow(&c, &have_c, index_bytes);
    int* perm = (int*)grow(&p, &have_p, index_bytes);
    float* sorted_values = (float*)grow(&v, &have_v, (size_t)nnz * sizeof(float));
    cudaMemcpyAsync(sorted_rows, row_indices, index_bytes, cudaMemcpyDeviceToDevice);
    cudaMemcpyAsync(sorted_cols, col_indices, index_bytes, cudaMemcpyDeviceToDevice);
    const unsigned blocks = (unsigned)(((size_t)nnz + 255) / 256);
    identity<<<blocks, 256>>>(nnz, perm);
    size_t bytes = 0;
    check(cusparseXcoosort_bufferSizeExt(handle(), rows, cols, nnz, sorted_rows, sorted_cols,
                                         &bytes),
          "cusparseXcoosort_bufferSizeExt");
    check(cusparseXcoosortByRow(handle(), rows, cols, nnz, sorted_rows, sorted_cols, perm,
                                grow(&b, &have_b, bytes)),
          "cusparseXcoosortByRow");
    gather<<<blocks, 256>>>(nnz, perm, values, sorted_values);
    return {sorted_rows, sorted_cols, sorted_values};
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
    const SortedCoo sorted = sort_by_row(row, cols, nnz, values, row_indices, col_indices);
    cusparseConstSpMatDescr_t A;
    cusparseConstDnMatDescr_t B;
    cusparseDnMatDescr_t C;
    check(cusparseCreateConstCoo(&A, row, cols, nnz, sorted.rows, sorted.cols, sorted.values,
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
