// Naive FP32 baseline, three kernels as the original: S = (Q K^T) * rsqrtf(dqk) with one thread
// per S element (16x16 blocks, ascending-k FMA), a row softmax with one thread per row, then
// Y = P V with one thread per Y element (ascending j). S and P are allocated and freed per call.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>

__global__ void sa_scores_kernel(float* S, const float* Q, const float* K, int nq, int nkv, int dqk) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;  // key index
    const int i = blockIdx.y * blockDim.y + threadIdx.y;  // query index
    if (i >= nq || j >= nkv) return;
    const float* qi = Q + (size_t)i * dqk;
    const float* kj = K + (size_t)j * dqk;
    float acc = 0.0f;
    for (int k = 0; k < dqk; ++k) acc = fmaf(qi[k], kj[k], acc);
    S[(size_t)i * nkv + j] = acc * rsqrtf((float)dqk);
}

__global__ void sa_softmax_kernel(float* P, const float* S, int nq, int nkv) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    const float* s = S + (size_t)i * nkv;
    float* p = P + (size_t)i * nkv;
    float m = -FLT_MAX;
    for (int j = 0; j < nkv; ++j) m = fmaxf(m, s[j]);
    float sum = 0.0f;
    for (int j = 0; j < nkv; ++j) {
        const float e = expf(s[j] - m);
        p[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < nkv; ++j) p[j] = p[j] * inv;
}

__global__ void sa_output_kernel(float* Y, const float* P, const float* V, int nq, int nkv, int dv) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;  // value column
    const int i = blockIdx.y * blockDim.y + threadIdx.y;  // query index
    if (i >= nq || c >= dv) return;
    const float* pi = P + (size_t)i * nkv;
    float acc = 0.0f;
    for (int j = 0; j < nkv; ++j) acc = fmaf(pi[j], V[(size_t)j * dv + c], acc);
    Y[(size_t)i * dv + c] = acc;
}

extern "C" void softmax_attention(float* Y, const float* Q, const float* K, const float* V,
                                  int q_seq_len, int kv_seq_len, int dim_qk, int dim_v) {
    if (q_seq_len > 0 && kv_seq_len > 0 && dim_v > 0) {
        const size_t bytes = (size_t)q_seq_len * kv_seq_len * sizeof(float);
        float *S = nullptr, *P = nullptr;
        cudaMalloc(&S, bytes);
        cudaMalloc(&P, bytes);
        const dim3 block(16, 16);
        const dim3 grid_s((kv_seq_len + 15) / 16, (q_seq_len + 15) / 16);
        sa_scores_kernel<<<grid_s, block>>>(S, Q, K, q_seq_len, kv_seq_len, dim_qk);
        sa_softmax_kernel<<<(q_seq_len + 255) / 256, 256>>>(P, S, q_seq_len, kv_seq_len);
        const dim3 grid_y((dim_v + 15) / 16, (q_seq_len + 15) / 16);
        sa_output_kernel<<<grid_y, block>>>(Y, P, V, q_seq_len, kv_seq_len, dim_v);
        cudaDeviceSynchronize();
        cudaFree(S);
        cudaFree(P);
    }
    cudaDeviceSynchronize();
}
