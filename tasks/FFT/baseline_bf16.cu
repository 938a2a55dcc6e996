// Naive BF16 baseline: the FP32 algorithm with the original's rounding points. The twiddles go
// double -> float -> bf16; each butterfly widens its operands to fp32, computes t = w*x2 and
// x1 +- t in fp32, and stores both results as bf16, so every stage's outputs are rounded.
// Per call: 4N bf16 of scratch and an N/2 bf16 twiddle table, device-to-device copies in and
// out, log2 N stage launches with a device sync after each.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

typedef __nv_bfloat16 bf16;

__global__ void fft_twiddles_bf16(bf16* w_re, bf16* w_im, int N) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < N / 2) {
        float theta = (float)(-2.0 * M_PI * k / N);
        double s, c;
        sincos((double)theta, &s, &c);
        w_re[k] = __float2bfloat16((float)c);
        w_im[k] = __float2bfloat16((float)s);
    }
}

__global__ void fft_bit_reverse_bf16(const bf16* in_re, const bf16* in_im, bf16* re, bf16* im,
                                     int N, int log2n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        int j = (int)(__brev((unsigned)i) >> (32 - log2n));
        re[i] = in_re[j];
        im[i] = in_im[j];
    }
}

__global__ void fft_stage_bf16(bf16* re, bf16* im, const bf16* w_re, const bf16* w_im, int N,
                               int half, int tw_stride) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < N / 2) {
        int g = b / half;
        int p = b - g * half;
        int i1 = g * 2 * half + p;
        int i2 = i1 + half;
        float wr = __bfloat162float(w_re[p * tw_stride]);
        float wi = __bfloat162float(w_im[p * tw_stride]);
        float x2r = __bfloat162float(re[i2]), x2i = __bfloat162float(im[i2]);
        float tr = wr * x2r - wi * x2i;
        float ti = wr * x2i + wi * x2r;
        float x1r = __bfloat162float(re[i1]), x1i = __bfloat162float(im[i1]);
        re[i1] = __float2bfloat16(x1r + tr);
        im[i1] = __float2bfloat16(x1i + ti);
        re[i2] = __float2bfloat16(x1r - tr);
        im[i2] = __float2bfloat16(x1i - ti);
    }
}

extern "C" void FFT_bf16(const bf16* input_real, const bf16* input_img, bf16* output_real,
                         bf16* output_img, int N) {
    if (N <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    int log2n = 0;
    while ((1 << log2n) < N) ++log2n;  // N is a power of two
    const size_t bytes = (size_t)N * sizeof(bf16);
    const int n_tw = N / 2 > 0 ? N / 2 : 1;
    bf16 *scratch = nullptr, *tw = nullptr;
    cudaMalloc(&scratch, 4 * bytes);
    cudaMalloc(&tw, 2 * (size_t)n_tw * sizeof(bf16));
    bf16 *in_re = scratch, *in_im = scratch + N, *re = scratch + 2 * (size_t)N,
         *im = scratch + 3 * (size_t)N;
    bf16 *w_re = tw, *w_im = tw + n_tw;
    cudaMemcpy(in_re, input_real, bytes, cudaMemcpyDeviceToDevice);
    cudaMemcpy(in_im, input_img, bytes, cudaMemcpyDeviceToDevice);
    const int threads = 256;
    if (N >= 2) {
        fft_twiddles_bf16<<<(N / 2 + threads - 1) / threads, threads>>>(w_re, w_im, N);
        fft_bit_reverse_bf16<<<(N + threads - 1) / threads, threads>>>(in_re, in_im, re, im, N,
                                                                       log2n);
        cudaDeviceSynchronize();
        for (int s = 1; s <= log2n; ++s) {
            int half = 1 << (s - 1);
            fft_stage_bf16<<<(N / 2 + threads - 1) / threads, threads>>>(re, im, w_re, w_im, N,
                                                                         half, N >> s);
            cudaDeviceSynchronize();
        }
    } else {  // N = 1: the transform is the identity
        cudaMemcpy(re, in_re, bytes, cudaMemcpyDeviceToDevice);
        cudaMemcpy(im, in_im, bytes, cudaMemcpyDeviceToDevice);
    }
    cudaMemcpy(output_real, re, bytes, cudaMemcpyDeviceToDevice);
    cudaMemcpy(output_img, im, bytes, cudaMemcpyDeviceToDevice);
    cudaFree(scratch);
    cudaFree(tw);
    cudaDeviceSynchronize();
}
