// Naive BF16 baseline: the FP32 merge sort on bf16 storage, comparing the values numerically.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void merge_pass_bf16(const __nv_bfloat16* src, __nv_bfloat16* dst, long long N,
                                long long width) {
    long long lo = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * 2 * width;
    if (lo >= N) return;
    long long mid = lo + width < N ? lo + width : N;
    long long hi = lo + 2 * width < N ? lo + 2 * width : N;
    long long i = lo, j = mid, k = lo;
    while (i < mid && j < hi) {
        bool right = __bfloat162float(src[j]) < __bfloat162float(src[i]);
        dst[k++] = right ? src[j++] : src[i++];
    }
    while (i < mid) dst[k++] = src[i++];
    while (j < hi) dst[k++] = src[j++];
}

extern "C" void sorting_bf16(__nv_bfloat16* data, int N) {
    if (N > 1) {
        __nv_bfloat16* tmp = nullptr;
        cudaMalloc(&tmp, (size_t)N * sizeof(__nv_bfloat16));
        __nv_bfloat16* src = data;
        __nv_bfloat16* dst = tmp;
        for (long long width = 1; width < N; width *= 2) {
            long long merges = (N + 2 * width - 1) / (2 * width);
            merge_pass_bf16<<<(unsigned)((merges + 255) / 256), 256>>>(src, dst, N, width);
            __nv_bfloat16* t = src;
            src = dst;
            dst = t;
        }
        if (src != data)
            cudaMemcpy(data, src, (size_t)N * sizeof(__nv_bfloat16), cudaMemcpyDeviceToDevice);
        cudaFree(tmp);
    }
    cudaDeviceSynchronize();
}
