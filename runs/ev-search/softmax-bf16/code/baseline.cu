// Naive BF16 baseline: one thread per row on a grid of blocks. Rounding points as the original:
// e_j is stored as bf16, the sum uses the unrounded fp32 e_j, out = bf(bf(e_j) * (1/sum)).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_bf16_row_kernel(__nv_bfloat16* out, const __nv_bfloat16* input, int N,
                                        int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const __nv_bfloat16* x = input + (size_t)r * C;
    __nv_bfloat16* y = out + (size_t)r * C;
    float m = -INFINITY;
    for (int j = 0; j < C; ++j) m = fmaxf(m, __bfloat162float(x[j]));
    float sum = 0.0f;
    for (int j = 0; j < C; ++j) {
        float e = expf(__bfloat162float(x[j]) - m);
        y[j] = __float2bfloat16(e);
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < C; ++j) y[j] = __float2bfloat16(__bfloat162float(y[j]) * inv);
}

extern "C" void softmax_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int N, int C) {
    if (N > 0 && C > 0) {
        const int threads = 256;
        softmax_bf16_row_kernel<<<(N + threads - 1) / threads, threads>>>(out, input, N, C);
    }
    cudaDeviceSynchronize();
}
