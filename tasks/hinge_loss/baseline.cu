// Naive FP32 baseline as the original: one thread per element, 1024-thread blocks on a grid
// covering all N; loss[i] = max(0, 1 - y*p) with y = +1 if targets[i] == 1, else -1.
#include <cuda_runtime.h>

__global__ void hinge_loss_kernel(float* loss, const float* predictions, const int* targets,
                                  int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float y = targets[i] == 1 ? 1.0f : -1.0f;
        loss[i] = fmaxf(0.0f, 1.0f - y * predictions[i]);
    }
}

extern "C" void hinge_loss(float* loss, const float* predictions, const int* targets, int N) {
    if (N > 0) {
        const int threads = 1024;
        hinge_loss_kernel<<<(N + threads - 1) / threads, threads>>>(loss, predictions, targets, N);
    }
    cudaDeviceSynchronize();
}
