// Naive FP32 baseline as the original: one thread per output element (b, h, i, d), 256-thread
// blocks. Per FEATURE d the score of key j <= i is the scalar product q[b,h,i,d]*k[b,h,j,d] /
// sqrtf(D); j is excluded where mask[b][i][j] > 0.5. Three passes over j (max, sum of exps,
// weighted sum of v), each recomputing the scores. No allowed j gives O = 0.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>

__global__ void triangle_attention_kernel(const float* query, const float* key, const float* value,
                                          const float* mask, float* output, int B, int H, int S,
                                          int D) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * H * S * D) return;
    const int d = (int)(idx % D);
    const int i = (int)((idx / D) % S);
    const long long bh = idx / ((long long)S * D);  // b*H + h
    const int b = (int)(bh / H);
    const float* kd = key + bh * S * D + d;    // key[b,h,j,d] = kd[j*D]
    const float* vd = value + bh * S * D + d;  // likewise for value
    const float* mrow = mask + ((long long)b * S + i) * S;
    const float qv = query[idx];
    const float root = sqrtf((float)D);

    float m = -FLT_MAX;
    for (int j = 0; j <= i; ++j) {
        if (mrow[j] > 0.5f) continue;
        m = fmaxf(m, qv * kd[(long long)j * D] / root);
    }
    float sum = 0.0f;
    for (int j = 0; j <= i; ++j) {
        if (mrow[j] > 0.5f) continue;
        sum += expf(qv * kd[(long long)j * D] / root - m);
    }
    float acc = 0.0f;
    if (sum > 0.0f) {
        for (int j = 0; j <= i; ++j) {
            if (mrow[j] > 0.5f) continue;
            const float w = expf(qv * kd[(long long)j * D] / root - m) / sum;
            acc = fmaf(w, vd[(long long)j * D], acc);
        }
    }
    output[idx] = acc;
}

extern "C" void triangle_attention(const float* query, const float* key, const float* value,
                                   const float* attention_mask, float* output, int batch_size,
                                   int head_num, int seq_length, int head_dim) {
    const long long total = (long long)batch_size * head_num * seq_length * head_dim;
    if (total > 0) {
        const int threads = 256;
        const unsigned blocks = (unsigned)((total + threads - 1) / threads);
        triangle_attention_kernel<<<blocks, threads>>>(query, key, value, attention_mask, output,
                                                       batch_size, head_num, seq_length, head_dim);
    }
    cudaDeviceSynchronize();
}
