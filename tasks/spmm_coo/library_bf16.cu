// Library baseline: cuSPARSE generic SpMM on COO with bf16 A and X and CUDA_R_32F compute
// (CUSPARSE_SPMM_ALG_DEFAULT: cuSPARSE documents that mixed precision selects its COO_ALG2),
// row-major X and Y, into a cached fp32 scratch of rows*K (beta = 0), then one rounding per
// output into the bf16 Y (an overwrite), as the baseline does: a bf16 Y would let the COO
// algorithm round partial sums. cuSPARSE's COO format assumes row order and these triplets are
// unsorted (passed as they are, they gave wrong sums on the GPU), so every call sorts a copy by
// row first, as a user of the library would have to: the indices are copied into cached scratch,
// cusparseXcoosortByRow sorts them and returns the permutation, and a small kernel gathers the
// values through it. Duplicates stay (SpMM sums them); the caller's arrays are not touched. The
// column count is not passed: a small kernel finds the largest column index on the device (one
// 4-byte copy back per call). Handle, scratch and work buffers are cached; the descriptors wrap
// the sorted copy, the caller's X and the fp32 scratch, made per call.
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmm_coo_bf16 library: %s failed: %s\n", what,
                cusparseGetErrorString(status));
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

static float* scratch(size_t count) {
    static void* p = nullptr;
    static size_t have = 0;
    return (float*)grow(&p, &have, count * sizeof(float));
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

__global__ void gather(int n, const int* perm, const __nv_bfloat16* in, __nv_bfloat16* out) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) out[j] = in[perm[j]];
}

__global__ void round_to_bf16(size_t n, const float* acc, __nv_bfloat16* Y) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) Y[i] = __float2bfloat16(acc[i]);
}

struct SortedCoo {
    const int* rows;
    const int* cols;
    const __nv_bfloat16* values;
};

// A copy of the triplets in row order, in cached scratch that grows with nnz
static SortedCoo sort_by_row(int rows, int cols, int nnz, const __nv_bfloat16* values,
                             const int* row_indices, const int* col_indices) {
    static void *r = nullptr, *c = nullptr, *p = nullptr, *v = nullptr, *b = nullptr;
    static size_t have_r = 0, have_c = 0, have_p = 0, have_v = 0, have_b = 0;
    const size_t index_bytes = (size_t)nnz * sizeof(int);
    int* sorted_rows = (int*)grow(&r, &have_r, index_bytes);
    int* sorted_cols = (int*)grow(&c, &have_c, index_bytes);
    int* perm = (int*)grow(&p, &have_p, index_bytes);
    __nv_bfloat16* sorted_values =
        (__nv_bfloat16*)grow(&v, &have_v, (size_t)nnz * sizeof(__nv_bfloat16));
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

extern "C" void spmm_coo_bf16(int rows, int nnz, int K, const __nv_bfloat16* values,
                              const int* row_indices, const int* col_indices,
                              const __nv_bfloat16* X, __nv_bfloat16* Y) {
    if (rows <= 0 || K <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    const size_t n = (size_t)rows * K;
    float* acc = scratch(n);
    if (nnz > 0) {
        int* dev = extent_scratch();
        cudaMemsetAsync(dev, 0, sizeof(int));
        index_extent<<<264, 256>>>(nnz, col_indices, dev);
        int cols = 0;
        cudaMemcpy(&cols, dev, sizeof(int), cudaMemcpyDeviceToHost);
        const SortedCoo sorted = sort_by_row(rows, cols, nnz, values, row_indices, col_indices);
        cusparseConstSpMatDescr_t A;
        cusparseConstDnMatDescr_t B;
        cusparseDnMatDescr_t C;
        check(cusparseCreateConstCoo(&A, rows, cols, nnz, sorted.rows, sorted.cols,
                                     sorted.values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                     CUDA_R_16BF),
              "cusparseCreateConstCoo");
        cusparseCreateConstDnMat(&B, cols, K, K, X, CUDA_R_16BF, CUSPARSE_ORDER_ROW);
        cusparseCreateDnMat(&C, rows, K, K, acc, CUDA_R_32F, CUSPARSE_ORDER_ROW);
        const float one = 1.0f, zero = 0.0f;
        const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
        size_t bytes = 0;
        check(cusparseSpMM_bufferSize(handle(), op, op, &one, A, B, &zero, C, CUDA_R_32F,
                                      CUSPARSE_SPMM_ALG_DEFAULT, &bytes),
              "cusparseSpMM_bufferSize");
        check(cusparseSpMM(handle(), op, op, &one, A, B, &zero, C, CUDA_R_32F,
                           CUSPARSE_SPMM_ALG_DEFAULT, workspace(bytes)),
              "cusparseSpMM");
        cusparseDestroySpMat(A);
        cusparseDestroyDnMat(B);
        cusparseDestroyDnMat(C);
    } else {
        cudaMemsetAsync(acc, 0, n * sizeof(float));
    }
    round_to_bf16<<<(unsigned)((n + 255) / 256), 256>>>(n, acc, Y);
    cudaDeviceSynchronize();
}
