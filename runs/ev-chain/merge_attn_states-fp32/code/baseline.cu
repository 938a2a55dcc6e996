// Naive FP32 baseline, as the original: a grid of (num_tokens, num_heads) blocks of head_size
// threads (so head_size <= 1024). Thread 0 of each block reads the two head-major LSEs, maps
// +-inf to -FLT_MAX, forms the two weights and the merged LSE in shared memory; then every thread
// merges one element of the token-major V rows. LSE_out is written when it is not null.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>

__global__ void merge_kernel(float* V_out, float* LSE_out, const float* V_a, const float* lse_a,
                             const float* V_b, const float* lse_b, int T, int H, int S) {
    const int t = blockIdx.x, h = blockIdx.y, s = threadIdx.x;
    __shared__ float wa, wb, lse;
    if (s == 0) {
        float pa = lse_a[(size_t)h * T + t];
        float pb = lse_b[(size_t)h * T + t];
        pa = isinf(pa) ? -FLT_MAX : pa;
        pb = isinf(pb) ? -FLT_MAX : pb;
        const float m = fmaxf(pa, pb);
        const float ea = expf(pa - m), eb = expf(pb - m);
        const float sum = ea + eb;
        wa = ea / sum;
        wb = eb / sum;
        lse = logf(sum) + m;
    }
    __syncthreads();
    const size_t at = ((size_t)t * H + h) * S + s;
    V_out[at] = V_a[at] * wa + V_b[at] * wb;
    if (LSE_out != nullptr && s == 0) LSE_out[(size_t)h * T + t] = lse;
}

extern "C" void merge_attn_states(float* V_out, float* LSE_out, const float* V_a,
                                  const float* lse_a, const float* V_b, const float* lse_b,
                                  int num_tokens, int num_heads, int head_size) {
    if (num_tokens > 0 && num_heads > 0 && head_size > 0) {
        dim3 grid(num_tokens, num_heads);
        merge_kernel<<<grid, head_size>>>(V_out, LSE_out, V_a, lse_a, V_b, lse_b, num_tokens,
                                          num_heads, head_size);
    }
    cudaDeviceSynchronize();
}
