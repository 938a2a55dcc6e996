// Naive BF16 baseline: one thread per row (256-thread blocks); bf16 A and x widened to fp32,
// ascending-n fp32 FMA, one rounding to bf16 at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void matrix_vector_mul_bf16_kernel(const __nv_bfloat16* A, const __nv_bfloat16* x,
                                              __nv_bfloat16* y, int M, int N) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const __nv_bfloat16* a = A + (size_t)row * N;
    float acc = 0.0f;
    for (int n = 0; n < N; ++n) acc = fmaf(__bfloat162float(a[n]), __bfloat162float(x[n]), acc);
    y[row] = __float2bfloat16(acc);
}

extern "C" void matrix_vector_mul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* x,
                                       __nv_bfloat16* y, int M, int N) {
    if (M > 0) {
        const int threads = 256;
        matrix_vector_mul_bf16_kernel<<<(M + threads - 1) / threads, threads>>>(A, x, y, M, N);
    }
    cudaDeviceSynchronize();
}
