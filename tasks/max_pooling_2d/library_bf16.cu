// Library baseline: cuDNN cudnnPoolingForward, CUDNN_POOLING_MAX, on NCHW bf16 tensors: a k x k
// window, stride s and padding p on both sides. cuDNN's max pooling never lets a padded cell win
// (it behaves as -inf), which is our semantics. A window without image cells (no case has one)
// may give cuDNN's lowest bf16 rather than the baseline's bf16(-FLT_MAX) = -inf.
// The output shape is checked once per shape against cudnnGetPooling2dForwardOutputDim. Handle
// and descriptors are cached and re-set when the shape changes. alpha and beta stay float.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <tuple>

static const cudnnDataType_t DTYPE = CUDNN_DATA_BFLOAT16;

static cudnnHandle_t handle() {
    static cudnnHandle_t h = nullptr;
    if (!h) cudnnCreate(&h);
    return h;
}

struct Pool {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnPoolingDescriptor_t p = nullptr;
    std::tuple<int, int, int, int, int, int, int> shape{-1, -1, -1, -1, -1, -1, -1};
    bool ok = false;
};

// Descriptors for this shape; false (after a message) if cuDNN disagrees on the output shape.
static bool prepare(Pool& d, int N, int C, int H, int W, int k, int s, int pad, int Ho, int Wo) {
    if (!d.x) {
        cudnnCreateTensorDescriptor(&d.x);
        cudnnCreateTensorDescriptor(&d.y);
        cudnnCreatePoolingDescriptor(&d.p);
    }
    auto key = std::make_tuple(N, C, H, W, k, s, pad);
    if (d.shape == key) return d.ok;
    d.shape = key;
    cudnnSetPooling2dDescriptor(d.p, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, k, k, pad, pad, s,
                                s);
    cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, DTYPE, N, C, H, W);
    int n = 0, c = 0, h = 0, w = 0;
    cudnnStatus_t st = cudnnGetPooling2dForwardOutputDim(d.p, d.x, &n, &c, &h, &w);
    d.ok = st == CUDNN_STATUS_SUCCESS && n == N && c == C && h == Ho && w == Wo;
    if (!d.ok)
        fprintf(stderr,
                "max_pooling_2d_bf16: cuDNN output %dx%dx%dx%d (%s), expected %dx%dx%dx%d\n", n,
                c, h, w, cudnnGetErrorString(st), N, C, Ho, Wo);
    cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, DTYPE, N, C, Ho, Wo);
    return d.ok;
}

extern "C" void max_pooling_2d_bf16(const __nv_bfloat16* input, __nv_bfloat16* output, int N,
                                    int C, int H, int W, int kernel_size, int stride,
                                    int padding) {
    static Pool d;
    bool valid = kernel_size > 0 && stride > 0 && H + 2 * padding >= kernel_size &&
                 W + 2 * padding >= kernel_size && N > 0 && C > 0;
    int Ho = valid ? (H + 2 * padding - kernel_size) / stride + 1 : 0;
    int Wo = valid ? (W + 2 * padding - kernel_size) / stride + 1 : 0;
    if (Ho > 0 && Wo > 0 && prepare(d, N, C, H, W, kernel_size, stride, padding, Ho, Wo)) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t s = cudnnPoolingForward(handle(), d.p, &one, d.x, input, &zero, d.y, output);
        if (s != CUDNN_STATUS_SUCCESS)
            fprintf(stderr, "max_pooling_2d_bf16: cuDNN: %s\n", cudnnGetErrorString(s));
    }
    cudaDeviceSynchronize();
}
