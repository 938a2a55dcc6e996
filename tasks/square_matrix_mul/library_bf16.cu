// Library baseline: cuBLASLt matmul with bf16 A, B, C and CUBLAS_COMPUTE_32F (fp32 accumulation,
// one rounding at the store); row-major through the same operand swap as the FP32 file.
// Not cublasGemmEx: for M = 2500 on the H200 its result had 20% of the elements beyond the
// tolerance, up to ~2.5 bf16 ulps off (partial sums rounded to bf16: most likely a split-K that
// adds them in place, in the output type). Here only algorithms that reduce in the compute type
// (fp32, in the workspace) are allowed.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

struct Plan {
    int m = -1;
    bool found = false;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t layout = nullptr;  // M x M bf16, column-major, ld M: A, B and C
    cublasLtMatmulAlgo_t algo{};
};

cublasLtHandle_t handle() {
    static cublasLtHandle_t h = nullptr;
    if (!h) cublasLtCreate(&h);
    return h;
}

void* workspace() {
    static void* p = nullptr;
    if (!p) cudaMalloc(&p, kWorkspaceBytes);
    return p;
}

// The descriptors and the heuristic's algorithm for size M, made once per size.
const Plan& plan(int M) {
    static Plan p;
    if (p.m == M) return p;
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    if (p.layout) cublasLtMatrixLayoutDestroy(p.layout);
    cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&p.layout, CUDA_R_16BF, M, M, M);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t bytes = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                         sizeof bytes);
    uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;  // no in-place/bf16 reduction
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                         &schemes, sizeof schemes);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    cublasLtMatmulAlgoGetHeuristic(handle(), p.op, p.layout, p.layout, p.layout, p.layout, pref, 1,
                                   &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    p.found = count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (!p.found) std::fprintf(stderr, "square_matrix_mul_bf16: no cuBLASLt algorithm for M=%d\n", M);
    p.algo = result.algo;
    p.m = M;
    return p;
}

}  // namespace

extern "C" void square_matrix_mul_bf16(__nv_bfloat16* A, __nv_bfloat16* B, __nv_bfloat16* C,
                                       int M) {
    const Plan& p = plan(M);
    if (!p.found) return;  // C stays as it was (poisoned by the harness): judged wrong
    const float one = 1.0f, zero = 0.0f;
    cublasLtMatmul(handle(), p.op, &one, B, p.layout, A, p.layout, &zero, C, p.layout, C,
                   p.layout, &p.algo, workspace(), kWorkspaceBytes, 0);
    cudaDeviceSynchronize();
}
