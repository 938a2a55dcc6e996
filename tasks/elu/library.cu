// Library baseline: cuDNN cudnnActivationForward, CUDNN_ACTIVATION_ELU with coef = alpha, on a
// packed N x 1 x 1 x 1 FP32 tensor. beta = 0, so the (poisoned) output is not read.
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
        cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, 1, 1, 1);
        n = N;
    }
    return d;
}

// One activation descriptor, re-set only when coef changes.
static cudnnActivationDescriptor_t act(double coef) {
    static cudnnActivationDescriptor_t a = nullptr;
    static bool set = false;
    static double c = 0.0;
    if (!a) cudnnCreateActivationDescriptor(&a);
    if (!set || c != coef) {
        cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_ELU, CUDNN_PROPAGATE_NAN, coef);
        c = coef;
        set = true;
    }
    return a;
}

extern "C" void elu(float* output, const float* input, const int N, float alpha) {
    if (N > 0) {
        const float scale = 1.0f, zero = 0.0f;
        cudnnTensorDescriptor_t d = desc(N);
        cudnnStatus_t s =
            cudnnActivationForward(handle(), act(alpha), &scale, d, input, &zero, d, output);
        if (s != CUDNN_STATUS_SUCCESS) fprintf(stderr, "elu: cuDNN: %s\n", cudnnGetErrorString(s));
    }
    cudaDeviceSynchronize();
}
