// Naive BF16 baseline, the FP32 structure with the original's rounding points: S is stored as
// bf16; e_j = expf(S_j - max) is stored as bf16 while the row sum uses the unrounded e_j;
// P_j = bf(bf(e_j) * (1/sum)); Y is accumulated in fp32 and rounded once at the store.
// S and P are bf16 buffers allocated and freed per call.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>

__global__ void sa_scores_bf16_kernel(__nv_bfloat16* S, const __nv_bfloat16* Q,
                                      const __nv_bfloat16* K, int nq, int nkv, int dqk) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;  // key index
    const int i = blockIdx.y * blockDim.y + threadIdx.y;  // query index
    if (i >= nq || j >= nkv) return;
    const __nv_bfloat16* qi = Q + (size_t)i * dqk;
    const __nv_bfloat16* kj = K + (size_t)j * dqk;
    float acc = 0.0f;
    for (int k = 0; k < dqk; ++k) acc = fmaf(__bfloat162float(qi[k]), __bfloat162float(kj[k]), acc);
    S[(size_t)i * nkv + j] = __float2bfloat16(acc * rsqrtf((float)dqk));
}

__global__ void sa_softmax_bf16_kernel(__nv_bfloat16* P, const __nv_bfloat16* S, int nq, int nkv) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    const __nv_bfloat16* s = S + (size_t)i * nkv;
    __nv_bfloat16* p = P + (size_t)i * nkv;
    float m = -FLT_MAX;
    for (int j = 0; j < nkv; ++j) m = fmaxf(m, __bfloat162float(s[j]));
    float sum = 0.0f;
    for (int j = 0; j < nkv; ++j) {
        const float e = expf(__bfloat162float(s[j]) - m);
        p[j] = __float2bfloat16(e);
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < nkv; ++j) p[j] = __float2bfloat16(__bfloat162float(p[j]) * inv);
}

__global__ void sa_output_bf16_kernel(__nv_bfloat16* Y, const __nv_bfloat16* P,
                                      const __nv_bfloat16* V, int nq, int nkv, int dv) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;  // value column
    const int i = blockIdx.y * blockDim.y + threadIdx.y;  // query index
    if (i >= nq || c >= dv) return;
    const __nv_bfloat16* pi = P + (size_t)i * nkv;
    float acc = 0.0f;
    for (int j = 0; j < nkv; ++j)
        acc = fmaf(__bfloat162float(pi[j]), __bfloat162float(V[(size_t)j * dv + c]), acc);
    Y[(size_t)i * dv + c] = __float2bfloat16(acc);
}

extern "C" void softmax_attention_bf16(__nv_bfloat16* Y, const __nv_bfloat16* Q,
                                       const __nv_bfloat16* K, const __nv_bfloat16* V,
                                       int q_seq_len, int kv_seq_len, int dim_qk, int dim_v) {
    if (q_seq_len > 0 && kv_seq_len > 0 && dim_v > 0) {
        const size_t bytes = (size_t)q_seq_len * kv_seq_len * sizeof(__nv_bfloat16);
        __nv_bfloat16 *S = nullptr, *P = nullptr;
        cudaMalloc(&S, bytes);
        cudaMalloc(&P, bytes);
        const dim3 block(16, 16);
        const dim3 grid_s((kv_seq_len + 15) / 16, (q_seq_len + 15) / 16);
        sa_scores_bf16_kernel<<<grid_s, block>>>(S, Q, K, q_seq_len, kv_seq_len, dim_qk);
        sa_softmax_bf16_kernel<<<(q_seq_len + 255) / 256, 256>>>(P, S, q_seq_len, kv_seq_len);
        const dim3 grid_y((dim_v + 15) / 16, (q_seq_len + 15) / 16);
        sa_output_bf16_kernel<<<grid_y, block>>>(Y, P, V, q_seq_len, kv_seq_len, dim_v);
        cudaDeviceSynchronize();
        cudaFree(S);
        cudaFree(P);
    }
    cudaDeviceSynchronize();
}
