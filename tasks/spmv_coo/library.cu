// Library baseline: cuSPARSE generic SpMV on COO (CUSPARSE_SPMV_COO_ALG1), y = 1*A*x + 1*y, so
// it accumulates into the caller's y exactly as the operator does. cuSPARSE's COO format assumes
// row order and these triplets are unsorted (passed as they are, SpMV faulted on the GPU), so
// every call sorts a copy by row first, as a user of the library would have to: the indices are
// copied into cached scratch, cusparseXcoosortByRow sorts them and returns the permutation, and a
// small kernel gathers the values through it. Duplicates stay (SpMV sums them); the caller's
// arrays are not touched. cols is not passed: a small kernel finds the largest column index on
// the device (one 4-byte copy back per call) and x is declared with that many + 1 entries, all
// that the product reads. Handle, scratch and work buffers are cached; the descriptors wrap the
// sorted copy and the caller's x and y, made per call.
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

extern "C" void spmv_coo(int rows, int nnz, const float* values, const int* row_indices,
                         const int* col_indices, const float* x, float* y) {
    if (rows <= 0 || nnz <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    int* dev = extent_scratch();
    cudaMemsetAsync(dev, 0, sizeof(int));
    index_extent<<<264, 256>>>(nnz, col_indices, dev);
    int cols = 0;
    cudaMemcpy(&cols, dev, sizeof(int), cudaMemcpyDeviceToHost);
    const SortedCoo sorted = sort_by_row(rows, cols, nnz, values, row_indices, col_indices);
    cusparseConstSpMatDescr_t A;
    cusparseConstDnVecDescr_t vx;
    cusparseDnVecDescr_t vy;
    check(cusparseCreateConstCoo(&A, rows, cols, nnz, sorted.rows, sorted.cols, sorted.values,
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
