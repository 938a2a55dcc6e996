// Naive BF16 baseline: the FP32 kernel (one thread per element, 1024-thread blocks) on widened
// bf16 predictions, one rounding to bf16 at the store. Unlike the original BF16 version, which
// launched a single block and so wrote only i < min(N, 1024), the grid covers all N.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void hinge_loss_bf16_kernel(__nv_bfloat16* loss, const __nv_bfloat16* predictions,
                                       const int* targets, int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float y = targets[i] == 1 ? 1.0f : -1.0f;
        loss[i] = __float2bfloat16(fmaxf(0.0f, 1.0f - y * __bfloat162float(predictions[i])));
    }
}

extern "C" void hinge_loss_bf16(__nv_bfloat16* loss, const __nv_bfloat16* predictions,
                                const int* targets, int N) {
    if (N > 0) {
        const int threads = 1024;
        hinge_loss_bf16_kernel<<<(N + threads - 1) / threads, threads>>>(loss, predictions,
                                                                         targets, N);
    }
    cudaDeviceSynchronize();
}
