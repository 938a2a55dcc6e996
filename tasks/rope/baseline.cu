// Naive FP32 baseline, as the original: one thread per adjacent pair (2p, 2p+1) of row m,
// theta = powf(base, (-2p)/D) with the exponent in fp32, phi = (float)m * theta, cosf/sinf,
// out[2p] = x0*cos - x1*sin, out[2p+1] = x0*sin + x1*cos. Grid of ceil(M*D/2 / 256) blocks.
#include <cuda_runtime.h>
#include <math.h>

__global__ void rope_kernel(float* out, const float* in, int M, int D, float base) {
    const int half = D / 2;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)M * half) return;
    const int m = (int)(idx / half);
    const int p = (int)(idx % half);
    const size_t at = (size_t)m * D + 2 * (size_t)p;
    const float x0 = in[at], x1 = in[at + 1];
    const float theta = powf(base, (-2.0f * (float)p) / (float)D);
    const float phi = (float)m * theta;
    const float c = cosf(phi), s = sinf(phi);
    out[at] = x0 * c - x1 * s;
    out[at + 1] = x0 * s + x1 * c;
}

extern "C" void rope(float* output, const float* input, int M, int D, float base) {
    const long long pairs = (long long)M * (D / 2);
    if (pairs > 0) {
        const int threads = 256;
        rope_kernel<<<(unsigned)((pairs + threads - 1) / threads), threads>>>(output, input, M, D,
                                                                              base);
    }
    cudaDeviceSynchronize();
}
