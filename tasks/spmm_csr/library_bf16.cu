// Library baseline: cuSPARSE generic SpMM on CSR with bf16 A and X and CUDA_R_32F compute
// (CUSPARSE_SPMM_ALG_DEFAULT: cuSPARSE documents that mixed precision selects its CSR_ALG3),
// row-major X and Y (CUSPARSE_ORDER_ROW), into a cached fp32 scratch of rows*K (beta = 0), then
// one rounding per output into the bf16 Y (an overwrite, round-to-nearest-even), as the baseline
// does: with a bf16 Y, cuSPARSE rounds partial results to bf16 (the GPU run found ~16% of the
// outputs one bf16 ulp off). The signature carries neither nnz nor the column count: a small
// kernel reads nnz = row_offsets[rows] and the largest column index on the device, and both come
// back in one 8-byte copy per call (X is declared with max column + 1 rows, all that the product
// reads). Handle, scratch and work buffer are cached; descriptors are made per call.
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

static void check(cusparseStatus_t status, const char* what) {
    if (status != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "spmm_csr_bf16 library: %s failed: %s\n", what,
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
    if (!p) cudaMalloc(&p, 2 * sizeof(int));
    return p;
}

// out[0] = nnz = row_offsets[rows]; out[1] = 1 + the largest column index (out zeroed before)
__global__ void csr_extent(int rows, const int* row_offsets, const int* col_indices, int* out) {
    const int nnz = row_offsets[rows];
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = nnz;
    int top = 0;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < nnz;
         j += (long long)gridDim.x * blockDim.x) {
        top = max(top, col_indices[j] + 1);
    }
    top = __reduce_max_sync(0xffffffffu, top);
    if ((threadIdx.x & 31) == 0) atomicMax(&out[1], top);
}

__global__ void round_to_bf16(size_t n, const float* acc, __nv_bfloat16* Y) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) Y[i] = __float2bfloat16(acc[i]);
}

extern "C" void spmm_csr_bf16(int rows, int K, const __nv_bfloat16* values,
                              const int* col_indices, const int* row_offsets,
                              const __nv_bfloat16* X, __nv_bfloat16* Y) {
    if (rows <= 0 || K <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    int* dev = extent_scratch();
    cudaMemsetAsync(dev, 0, 2 * sizeof(int));
    csr_extent<<<264, 256>>>(rows, row_offsets, col_indices, dev);
    int extent[2] = {0, 0};
    cudaMemcpy(extent, dev, sizeof(extent), cudaMemcpyDeviceToHost);
    const int64_t nnz = extent[0], cols = extent[1] > 0 ? extent[1] : 1;
    const size_t n = (size_t)rows * K;
    float* acc = scratch(n);
    if (nnz > 0) {
        cusparseConstSpMatDescr_t A;
        cusparseConstDnMatDescr_t B;
        cusparseDnMatDescr_t C;
        check(cusparseCreateConstCsr(&A, rows, cols, nnz, row_offsets, col_indices, values,
                                     CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                     CUSPARSE_INDEX_BASE_ZERO, CUDA_R_16BF),
              "cusparseCreateConstCsr");
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
