// Naive FP32 baseline: bottom-up merge sort, one thread per merge of two adjacent runs, ping-ponging
// between data and a temp buffer allocated per call. Stable: on a tie the left run goes first.
// Each width is merged once (the original merged every width twice; the second pass was redundant).
#include <cuda_runtime.h>

__global__ void merge_pass(const float* src, float* dst, long long N, long long width) {
    long long lo = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * 2 * width;
    if (lo >= N) return;
    long long mid = lo + width < N ? lo + width : N;
    long long hi = lo + 2 * width < N ? lo + 2 * width : N;
    long long i = lo, j = mid, k = lo;
    while (i < mid && j < hi) dst[k++] = (src[j] < src[i]) ? src[j++] : src[i++];
    while (i < mid) dst[k++] = src[i++];
    while (j < hi) dst[k++] = src[j++];
}

extern "C" void sorting(float* data, int N) {
    if (N > 1) {
        float* tmp = nullptr;
        cudaMalloc(&tmp, (size_t)N * sizeof(float));
        float* src = data;
        float* dst = tmp;
        for (long long width = 1; width < N; width *= 2) {
            long long merges = (N + 2 * width - 1) / (2 * width);
            merge_pass<<<(unsigned)((merges + 255) / 256), 256>>>(src, dst, N, width);
            float* t = src;
            src = dst;
            dst = t;
        }
        if (src != data) cudaMemcpy(data, src, (size_t)N * sizeof(float), cudaMemcpyDeviceToDevice);
        cudaFree(tmp);
    }
    cudaDeviceSynchronize();
}
