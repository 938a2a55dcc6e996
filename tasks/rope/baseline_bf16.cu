// Naive BF16 baseline: the FP32 algorithm (one thread per adjacent pair, theta and phi in fp32,
// cosf/sinf), bf16 inputs widened, each output rounded once at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void rope_bf16_kernel(__nv_bfloat16* out, const __nv_bfloat16* in, int M, int D,
                                 float base) {
    const int half = D / 2;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)M * half) return;
    const int m = (int)(idx / half);
    const int p = (int)(idx % half);
    const size_t at = (size_t)m * D + 2 * (size_t)p;
    const float x0 = __bfloat162float(in[at]), x1 = __bfloat162float(in[at + 1]);
    const float theta = powf(base, (-2.0f * (float)p) / (float)D);
    const float phi = (float)m * theta;
    const float c = cosf(phi), s = sinf(phi);
    out[at] = __float2bfloat16(x0 * c - x1 * s);
    out[at + 1] = __float2bfloat16(x0 * s + x1 * c);
}

extern "C" void rope_bf16(__nv_bfloat16* output, const __nv_bfloat16* input, int M, int D,
                          float base) {
    const long long pairs = (long long)M * (D / 2);
    if (pairs > 0) {
        const int threads = 256;
        rope_bf16_kernel<<<(unsigned)((pairs + threads - 1) / threads), threads>>>(output, input,
                                                                                   M, D, base);
    }
    cudaDeviceSynchronize();
}
