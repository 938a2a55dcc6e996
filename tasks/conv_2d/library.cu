// Library baseline: cuDNN cudnnConvolutionForward in CUDNN_CROSS_CORRELATION mode (no kernel
// flip) on a 1x1xHxW input and a 1x1xkh x kw filter, no padding, unit stride, fp32 compute.
// Math type CUDNN_FMA_MATH: cuDNN's CUDNN_DEFAULT_MATH permits TF32 tensor cores for fp32 data
// on Ampere and later; FMA_MATH keeps full fp32 products. The algorithm is cuDNN's first
// heuristic choice (cudnnGetConvolutionForwardAlgorithm_v7) that is supported without tensor-op
// math, chosen once per shape and cached; handle, descriptors and workspace are cached.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <map>
#include <stdio.h>
#include <tuple>

static const cudnnDataType_t DTYPE = CUDNN_DATA_FLOAT;
static const cudnnMathType_t MATH = CUDNN_FMA_MATH;

static cudnnHandle_t handle() {
    static cudnnHandle_t h = nullptr;
    if (!h) cudnnCreate(&h);
    return h;
}

// Cached workspace, grown when needed; nullptr if a needed allocation fails.
static void* workspace(size_t bytes) {
    static void* p = nullptr;
    static size_t have = 0;
    if (bytes > have) {
        if (p) cudaFree(p);
        p = nullptr;
        have = 0;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            cudaGetLastError();
            p = nullptr;
            return nullptr;
        }
        have = bytes;
    }
    return p;
}

struct Conv {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t c = nullptr;
    std::tuple<int, int, int, int> shape{-1, -1, -1, -1};
};

struct Choice {
    bool ok;
    cudnnConvolutionFwdAlgo_t algo;
    size_t bytes;
};

static bool tensor_op(cudnnMathType_t m) {
    return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// Descriptors for this shape (re-set when it changes) and the cached algorithm choice.
static Choice prepare(Conv& d, int H, int W, int kh, int kw) {
    static std::map<std::tuple<int, int, int, int>, Choice> chosen;
    if (!d.x) {
        cudnnCreateTensorDescriptor(&d.x);
        cudnnCreateTensorDescriptor(&d.y);
        cudnnCreateFilterDescriptor(&d.w);
        cudnnCreateConvolutionDescriptor(&d.c);
        cudnnSetConvolution2dDescriptor(d.c, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT);
        cudnnSetConvolutionMathType(d.c, MATH);
    }
    auto key = std::make_tuple(H, W, kh, kw);
    if (d.shape != key) {
        cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, DTYPE, 1, 1, H, W);
        cudnnSetFilter4dDescriptor(d.w, DTYPE, CUDNN_TENSOR_NCHW, 1, 1, kh, kw);
        cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, DTYPE, 1, 1, H - kh + 1, W - kw + 1);
        d.shape = key;
    }
    auto it = chosen.find(key);
    if (it != chosen.end()) return it->second;
    Choice pick{false, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, 0};
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    cudnnStatus_t s = cudnnGetConvolutionForwardAlgorithm_v7(
        handle(), d.x, d.w, d.c, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < n && !pick.ok; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || tensor_op(perf[i].mathType)) continue;
        size_t bytes = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(handle(), d.x, d.w, d.c, d.y, perf[i].algo,
                                                    &bytes) == CUDNN_STATUS_SUCCESS &&
            (bytes == 0 || workspace(bytes) != nullptr))
            pick = Choice{true, perf[i].algo, bytes};
    }
    if (!pick.ok) fprintf(stderr, "conv: no cuDNN algorithm for %dx%d * %dx%d\n", H, W, kh, kw);
    chosen[key] = pick;
    return pick;
}

static void run(const void* input, const void* kernel, void* output, int H, int W, int kh,
                int kw) {
    static Conv d;
    if (kh <= 0 || kw <= 0 || H - kh + 1 <= 0 || W - kw + 1 <= 0) return;
    Choice pick = prepare(d, H, W, kh, kw);
    if (!pick.ok) return;
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s =
        cudnnConvolutionForward(handle(), &one, d.x, input, d.w, kernel, d.c, pick.algo,
                                workspace(pick.bytes), pick.bytes, &zero, d.y, output);
    if (s != CUDNN_STATUS_SUCCESS) fprintf(stderr, "conv: cuDNN: %s\n", cudnnGetErrorString(s));
}

extern "C" void conv_2d(const float* input, const float* kernel, float* output, int input_rows,
                        int input_cols, int kernel_rows, int kernel_cols) {
    run(input, kernel, output, input_rows, input_cols, kernel_rows, kernel_cols);
    cudaDeviceSynchronize();
}
