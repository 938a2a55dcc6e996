// Naive BF16 baseline: the FP32 algorithm (one thread per output element, per-feature scores
// q*k / sqrtf(D), three passes) on widened bf16 q, k, v; the mask stays fp32. All math in fp32,
// one rounding to bf16 at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>

__global__ void triangle_attention_bf16_kernel(const __nv_bfloat16* query,
                                               const __nv_bfloat16* key,
                                               const __nv_bfloat16* value, const float* mask,
                                               __nv_bfloat16* output, int B, int H, int S, int D) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * H * S * D) return;
    const int d = (int)(idx % D);
    const int i = (int)((idx / D) % S);
    const long long bh = idx / ((long long)S * D);  // b*H + h
    const int b = (int)(bh / H);
    const __nv_bfloat16* kd = key + bh * S * D + d;    // key[b,h,j,d] = kd[j*D]
    const __nv_bfloat16* vd = value + bh * S * D + d;  // likewise for value
    const float* mrow = mask + ((long long)b * S + i) * S;
    const float qv = __bfloat162float(query[idx]);
    const float root = sqrtf((float)D);

    float m = -FLT_MAX;
    for (int j = 0; j <= i; ++j) {
        if (mrow[j] > 0.5f) continue;
        m = fmaxf(m, qv * __bfloat162float(kd[(long long)j * D]) / root);
    }
    float sum = 0.0f;
    for (int j = 0; j <= i; ++j) {
        if (mrow[j] > 0.5f) continue;
        sum += expf(qv * __bfloat162float(kd[(long long)j * D]) / root - m);
    }
    float acc = 0.0f;
    if (sum > 0.0f) {
        for (int j = 0; j <= i; ++j) {
            if (mrow[j] > 0.5f) continue;
            const float w = expf(qv * __bfloat162float(kd[(long long)j * D]) / root - m) / sum;
            acc = fmaf(w, __bfloat162float(vd[(long long)j * D]), acc);
        }
    }
    output[idx] = __float2bfloat16(acc);
}

extern "C" void triangle_attention_bf16(const __nv_bfloat16* query, const __nv_bfloat16* key,
                                        const __nv_bfloat16* value, const float* attention_mask,
                                        __nv_bfloat16* output, int batch_size, int head_num,
                                        int seq_length, int head_dim) {
    const long long total = (long long)batch_size * head_num * seq_length * head_dim;
    if (total > 0) {
        const int threads = 256;
        const unsigned blocks = (unsigned)((total + threads - 1) / threads);
        triangle_attention_bf16_kernel<<<blocks, threads>>>(query, key, value, attention_mask,
                                                            output, batch_size, head_num,
                                                            seq_length, head_dim);
    }
    cudaDeviceSynchronize();
}
