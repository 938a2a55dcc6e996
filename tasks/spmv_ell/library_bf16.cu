// Library baseline: cuSPARSE generic SpMV on Sliced-ELL (CUSPARSE_SPMV_SELL_ALG1) with slice size
// 1, bf16 values, x and y, CUDA_R_32F compute (one rounding per row at the store; ELL rows are
// independent, so no partial sums are rounded). With one row per slice, Sliced-ELL's layout is
// exactly this row-major ELL with slice offsets r*W and column -1 padding. The slice offsets
// (rows+1 ints) are written by a small kernel into a cached buffer every call; nnz (not passed)
// is declared as rows*W and cols as INT_MAX. Handle, offsets and work buffer are cached.
#include <climits>
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmv_ell_bf16 library: %s failed: %s\n", what,
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

static int* slice_offsets(size_t count) {
    static void* p = nullptr;
    static size_t have = 0;
    return (int*)grow(&p, &have, count * sizeof(int));
}

__global__ void fill_slice_offsets(int rows, int width, int* offsets) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r <= rows) offsets[r] = r * width;
}

extern "C" void spmv_ell_bf16(int rows, int max_nnz_per_row, const __nv_bfloat16* values,
                              const int* col_ids, const __nv_bfloat16* x, __nv_bfloat16* y) {
    if (rows <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    const int64_t cols = INT_MAX;
    const int64_t slots = (int64_t)rows * max_nnz_per_row;
    int* offsets = slice_offsets((size_t)rows + 1);
    fill_slice_offsets<<<(rows + 256) / 256, 256>>>(rows, max_nnz_per_row, offsets);
    cusparseConstSpMatDescr_t A;
    cusparseConstDnVecDescr_t vx;
    cusparseDnVecDescr_t vy;
    check(cusparseCreateConstSlicedEll(&A, rows, cols, slots, slots, 1, offsets, col_ids, values,
                                       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                       CUSPARSE_INDEX_BASE_ZERO, CUDA_R_16BF),
          "cusparseCreateConstSlicedEll");
    cusparseCreateConstDnVec(&vx, cols, x, CUDA_R_16BF);
    cusparseCreateDnVec(&vy, rows, y, CUDA_R_16BF);
    const float one = 1.0f, zero = 0.0f;
    size_t bytes = 0;
    check(cusparseSpMV_bufferSize(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero,
                                  vy, CUDA_R_32F, CUSPARSE_SPMV_SELL_ALG1, &bytes),
          "cusparseSpMV_bufferSize");
    check(cusparseSpMV(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy,
                       CUDA_R_32F, CUSPARSE_SPMV_SELL_ALG1, workspace(bytes)),
          "cusparseSpMV");
    cusparseDestroySpMat(A);
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    cudaDeviceSynchronize();
}
