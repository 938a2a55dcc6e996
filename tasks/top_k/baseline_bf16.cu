// Naive BF16 baseline: the FP32 merge sort on (bf16 value, int index) pairs (8 bytes with
// padding), comparing the values numerically; ties keep ascending index. Values are copied out
// bit for bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

struct PairBf16 {
    __nv_bfloat16 v;
    int i;
};

__global__ void topk_bf16_init(const __nv_bfloat16* input, PairBf16* p, int N) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < N) p[t] = PairBf16{input[t], t};
}

__global__ void topk_bf16_merge(const PairBf16* src, PairBf16* dst, long long N,
                                long long width) {
    long long lo = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * 2 * width;
    if (lo >= N) return;
    long long mid = lo + width < N ? lo + width : N;
    long long hi = lo + 2 * width < N ? lo + 2 * width : N;
    long long a = lo, b = mid, o = lo;
    while (a < mid && b < hi) {
        bool right = __bfloat162float(src[b].v) > __bfloat162float(src[a].v);
        dst[o++] = right ? src[b++] : src[a++];
    }
    while (a < mid) dst[o++] = src[a++];
    while (b < hi) dst[o++] = src[b++];
}

__global__ void topk_bf16_store(const PairBf16* p, __nv_bfloat16* values, int* indices, int k) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < k) {
        values[t] = p[t].v;
        indices[t] = p[t].i;
    }
}

extern "C" void top_k_bf16(__nv_bfloat16* top_k_values, int* top_k_indices,
                           const __nv_bfloat16* input, const int N, const int k) {
    if (N > 0 && k > 0) {
        PairBf16* buf[2] = {nullptr, nullptr};
        cudaMalloc(&buf[0], (size_t)N * sizeof(PairBf16));
        cudaMalloc(&buf[1], (size_t)N * sizeof(PairBf16));
        topk_bf16_init<<<(N + 255) / 256, 256>>>(input, buf[0], N);
        int cur = 0;
        for (long long width = 1; width < N; width *= 2) {
            long long merges = (N + 2 * width - 1) / (2 * width);
            topk_bf16_merge<<<(unsigned)((merges + 255) / 256), 256>>>(buf[cur], buf[1 - cur], N,
                                                                        width);
            cur = 1 - cur;
        }
        int kk = k < N ? k : N;
        topk_bf16_store<<<(kk + 255) / 256, 256>>>(buf[cur], top_k_values, top_k_indices, kk);
        cudaFree(buf[0]);
        cudaFree(buf[1]);
    }
    cudaDeviceSynchronize();
}
