// Library baseline: cuDNN cudnnActivationForward, CUDNN_ACTIVATION_TANH, on a packed
// N x 1 x 1 x 1 BF16 tensor (the op is element-wise over the flat vector). beta = 0, so the
// (poisoned) output is not read.
// BF16 data takes float scaling factors (scale and beta).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>

static cudnnHandle_t handle() {
    static cudnnHandle_t h = nullptr;
    if (!h) cudnnCreate(&h);
    return h;
}

// One packed N x 1 x 1 x 1 tensor descriptor (input and output alike), re-set only when N changes.
static cudnnTensorDescriptor_t desc(int N) {
    static cudnnTensorDescriptor_t d = nullptr;
    static int n = -1;
    if (!d) cudnnCreateTensorDescriptor(&d);
    if (n != N) {
        cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_BFLOAT16, N, 1, 1, 1);
        n = N;
    }
    return d;
}

// One activation descriptor, made once (coef is unused by this mode).
static cudnnActivationDescriptor_t act() {
    static cudnnActivationDescriptor_t a = nullptr;
    if (!a) {
        cudnnCreateActivationDescriptor(&a);
        cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_TANH, CUDNN_PROPAGATE_NAN, 0.0);
    }
    return a;
}

extern "C" void row_tanh_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, const int N) {
    if (N > 0) {
        const float scale = 1.0f, zero = 0.0f;
        cudnnTensorDescriptor_t d = desc(N);
        cudnnStatus_t s =
            cudnnActivationForward(handle(), act(), &scale, d, input, &zero, d, out);
        if (s != CUDNN_STATUS_SUCCESS)
            fprintf(stderr, "row_tanh_bf16: cuDNN: %s\n", cudnnGetErrorString(s));
    }
    cudaDeviceSynchronize();
}
