// Library baseline: cuSPARSE generic SpMV on CSC (cusparseCreateConstCsc, CUSPARSE_SPMV_CSR_ALG1)
// with bf16 values and x, CUDA_R_32F compute, into a cached fp32 scratch y (beta = 0), then one
// rounding per row into the bf16 y (an overwrite), as the baseline does: CSC is a transposed
// CSR for cuSPARSE, whose scatter into a bf16 y could round partial sums. nnz is read back from
// col_offsets[columns] (4 bytes per call). Handle, work buffer and scratch are cached.
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmv_csc_bf16 library: %s failed: %s\n", what,
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

__global__ void round_to_bf16(int n, const float* acc, __nv_bfloat16* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2bfloat16(acc[i]);
}

extern "C" void spmv_csc_bf16(int rows, int columns, const __nv_bfloat16* values,
                              const int* row_indices, const int* col_offsets,
                              const __nv_bfloat16* x, __nv_bfloat16* y) {
    if (rows <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    float* acc = scratch((size_t)rows);
    int nnz = 0;
    if (columns > 0) cudaMemcpy(&nnz, col_offsets + columns, sizeof(int), cudaMemcpyDeviceToHost);
    if (nnz > 0) {
        cusparseConstSpMatDescr_t A;
        cusparseConstDnVecDescr_t vx;
        cusparseDnVecDescr_t vy;
        check(cusparseCreateConstCsc(&A, rows, columns, nnz, col_offsets, row_indices, values,
                                     CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                     CUSPARSE_INDEX_BASE_ZERO, CUDA_R_16BF),
              "cusparseCreateConstCsc");
        cusparseCreateConstDnVec(&vx, columns, x, CUDA_R_16BF);
        cusparseCreateDnVec(&vy, rows, acc, CUDA_R_32F);
        const float one = 1.0f, zero = 0.0f;
        size_t bytes = 0;
        check(cusparseSpMV_bufferSize(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx,
                                      &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG1, &bytes),
              "cusparseSpMV_bufferSize");
        check(cusparseSpMV(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy,
                           CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG1, workspace(bytes)),
              "cusparseSpMV");
        cusparseDestroySpMat(A);
        cusparseDestroyDnVec(vx);
        cusparseDestroyDnVec(vy);
    } else {
        cudaMemsetAsync(acc, 0, (size_t)rows * sizeof(float));
    }
    round_to_bf16<<<(rows + 255) / 256, 256>>>(rows, acc, y);
    cudaDeviceSynchronize();
}
