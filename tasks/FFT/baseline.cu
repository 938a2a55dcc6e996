// Naive FP32 baseline: iterative radix-2 decimation-in-time FFT (forward, unnormalised), as the
// original: per call it allocates 4N floats of scratch and an N/2 twiddle table, copies the inputs
// in, permutes them into bit-reversed order, runs log2 N butterfly stages (one launch and one
// device sync each) and copies the result out. All copies are device to device. The twiddles
// are built every call as the original did on the host (theta in double, rounded to float,
// cos/sin in double, stored as float), here by a kernel instead of a host loop and an upload.
#include <cuda_runtime.h>
#include <math.h>

__global__ void fft_twiddles(float* w_re, float* w_im, int N) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < N / 2) {
        float theta = (float)(-2.0 * M_PI * k / N);
        double s, c;
        sincos((double)theta, &s, &c);
        w_re[k] = (float)c;
        w_im[k] = (float)s;
    }
}

__global__ void fft_bit_reverse(const float* in_re, const float* in_im, float* re, float* im,
                                int N, int log2n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        int j = (int)(__brev((unsigned)i) >> (32 - log2n));
        re[i] = in_re[j];
        im[i] = in_im[j];
    }
}

// One stage: butterfly b pairs i1 = g*2*half + p with i2 = i1 + half, twiddle W[p*N/(2*half)].
__global__ void fft_stage(float* re, float* im, const float* w_re, const float* w_im, int N,
                          int half, int tw_stride) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < N / 2) {
        int g = b / half;
        int p = b - g * half;
        int i1 = g * 2 * half + p;
        int i2 = i1 + half;
        float wr = w_re[p * tw_stride], wi = w_im[p * tw_stride];
        float x2r = re[i2], x2i = im[i2];
        float tr = wr * x2r - wi * x2i;
        float ti = wr * x2i + wi * x2r;
        float x1r = re[i1], x1i = im[i1];
        re[i1] = x1r + tr;
        im[i1] = x1i + ti;
        re[i2] = x1r - tr;
        im[i2] = x1i - ti;
    }
}

extern "C" void FFT(const float* input_real, const float* input_img, float* output_real,
                    float* output_img, int N) {
    if (N <= 0) {
        cudaDeviceSynchronize();
        return;
    }
    int log2n = 0;
    while ((1 << log2n) < N) ++log2n;  // N is a power of two
    const size_t bytes = (size_t)N * sizeof(float);
    float *scratch = nullptr, *tw = nullptr;
    cudaMalloc(&scratch, 4 * bytes);
    cudaMalloc(&tw, (N / 2 > 0 ? N / 2 : 1) * 2 * sizeof(float));
    float *in_re = scratch, *in_im = scratch + N, *re = scratch + 2 * (size_t)N,
          *im = scratch + 3 * (size_t)N;
    float *w_re = tw, *w_im = tw + (N / 2 > 0 ? N / 2 : 1);
    cudaMemcpy(in_re, input_real, bytes, cudaMemcpyDeviceToDevice);
    cudaMemcpy(in_im, input_img, bytes, cudaMemcpyDeviceToDevice);
    const int threads = 256;
    if (N >= 2) {
        fft_twiddles<<<(N / 2 + threads - 1) / threads, threads>>>(w_re, w_im, N);
        fft_bit_reverse<<<(N + threads - 1) / threads, threads>>>(in_re, in_im, re, im, N, log2n);
        cudaDeviceSynchronize();
        for (int s = 1; s <= log2n; ++s) {
            int half = 1 << (s - 1);
            fft_stage<<<(N / 2 + threads - 1) / threads, threads>>>(re, im, w_re, w_im, N, half,
                                                                   N >> s);
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
