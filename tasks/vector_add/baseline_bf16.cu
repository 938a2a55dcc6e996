// Naive BF16 baseline: widen, add in fp32, round once at the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void vector_add_bf16_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                       __nv_bfloat16* C, int N) {
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        C[i] = __float2bfloat16(__bfloat162float(A[i]) + __bfloat162float(B[i]));
    }
}

extern "C" void vector_add_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C,
                                int N) {
    vector_add_bf16_kernel<<<1, 1024>>>(A, B, C, N);
    cudaDeviceSynchronize();
}
