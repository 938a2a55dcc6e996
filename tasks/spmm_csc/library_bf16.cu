// Library baseline: cuSPARSE generic SpMM on CSC (cusparseCreateConstCsc,
// CUSPARSE_SPMM_ALG_DEFAULT) with bf16 A and X and CUDA_R_32F compute, row-major X and Y, into a
// cached fp32 scratch of rows*K (beta = 0), then one rounding per output into the bf16 Y (an
// overwrite), as the baseline does: CSC is a transposed CSR for cuSPARSE, whose scatter into a
// bf16 Y could round partial sums. nnz is read back from col_offsets[columns] (4 bytes per call).
// Handle, scratch and work buffer are cached; descriptors are made per call.
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmm_csc_bf16 library: %s failed: %s\n", what,
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

__global__ void round_to_bf16(size_t n, const float* acc, __nv_bfloat16* Y) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) Y[i] = __float2bfloat16(acc[i]);
}

extern "C" void spmm_csc_bf16(int rows, int columns, int K, const __nv_bfloat16* values,
                              const int* row_indices, const int* col_offsets,
                              const __nv_bfloat16* X, __nv_bfloat16* Y) {
    if (rows <= 0 || K <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    const size_t n = (size_t)rows * K;
    float* acc = scratch(n);
    int nnz = 0;
    if (columns > 0) cudaMemcpy(&nnz, col_offsets + columns, sizeof(int), cudaMemcpyDeviceToHost);
    if (nnz > 0) {
        cusparseConstSpMatDescr_t A;
        cusparseConstDnMatDescr_t B;
        cusparseDnMatDescr_t C;
        check(cusparseCreateConstCsc(&A, rows, columns, nnz, col_offsets, row_indices, values,
                                     CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                     CUSPARSE_INDEX_BASE_ZERO, CUDA_R_16BF),
              "cusparseCreateConstCsc");
        cusparseCreateConstDnMat(&B, columns, K, K, X, CUDA_R_16BF, CUSPARSE_ORDER_ROW);
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
