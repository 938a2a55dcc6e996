// Naive FP32 baseline: a full bottom-up merge sort of (value, index) pairs in descending order,
// one thread per merge of two adjacent runs, ping-ponging between two per-call pair buffers;
// then the first k pairs are split into the two outputs. On equal values the left run goes
// first, so ties keep ascending index (a stable descending sort).
#include <cuda_runtime.h>

struct Pair {
    float v;
    int i;
};

__global__ void topk_init(const float* input, Pair* p, int N) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < N) p[t] = Pair{input[t], t};
}

__global__ void topk_merge(const Pair* src, Pair* dst, long long N, long long width) {
    long long lo = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * 2 * width;
    if (lo >= N) return;
    long long mid = lo + width < N ? lo + width : N;
    long long hi = lo + 2 * width < N ? lo + 2 * width : N;
    long long a = lo, b = mid, o = lo;
    while (a < mid && b < hi) dst[o++] = (src[b].v > src[a].v) ? src[b++] : src[a++];
    while (a < mid) dst[o++] = src[a++];
    while (b < hi) dst[o++] = src[b++];
}

__global__ void topk_store(const Pair* p, float* values, int* indices, int k) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < k) {
        values[t] = p[t].v;
        indices[t] = p[t].i;
    }
}

extern "C" void top_k(float* top_k_values, int* top_k_indices, const float* input, const int N,
                      const int k) {
    if (N > 0 && k > 0) {
        Pair* buf[2] = {nullptr, nullptr};
        cudaMalloc(&buf[0], (size_t)N * sizeof(Pair));
        cudaMalloc(&buf[1], (size_t)N * sizeof(Pair));
        topk_init<<<(N + 255) / 256, 256>>>(input, buf[0], N);
        int cur = 0;
        for (long long width = 1; width < N; width *= 2) {
            long long merges = (N + 2 * width - 1) / (2 * width);
            topk_merge<<<(unsigned)((merges + 255) / 256), 256>>>(buf[cur], buf[1 - cur], N, width);
            cur = 1 - cur;
        }
        int kk = k < N ? k : N;
        topk_store<<<(kk + 255) / 256, 256>>>(buf[cur], top_k_values, top_k_indices, kk);
        cudaFree(buf[0]);
        cudaFree(buf[1]);
    }
    cudaDeviceSynchronize();
}
