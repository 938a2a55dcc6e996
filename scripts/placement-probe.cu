// Does a one-block kernel's time depend on where its buffers lie in device memory? One process
// allocates, TRIALS times over, a fresh set of buffers (after a padding allocation of a varying
// size, all kept, so that every trial gets memory no earlier trial had) and times a one-block,
// 1024-thread vector add over 2^25 - 1 floats (vector_add's large case 1) after an L2-flushing
// memset, as the harness times it. It prints per trial the SM the block ran on (%smid) and the
// median of LAUNCHES event times. Trial medians that split into groups within one process mean
// the A/A spread of such a kernel between two processes is placement, not the harness.
//   nvcc -O2 -arch=sm_90 -o probe scripts/placement-probe.cu && ./probe 12 15
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__device__ unsigned int g_smid;

__global__ void one_block_add(const float* a, const float* b, float* c, int n) {
    if (threadIdx.x == 0) {
        unsigned int s;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
        g_smid = s;
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) c[i] = a[i] + b[i];
}

#define CHECK(x)                                                                   \
    do {                                                                           \
        cudaError_t e = (x);                                                       \
        if (e != cudaSuccess) {                                                    \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                \
            return 1;                                                              \
        }                                                                          \
    } while (0)

static int by_value(const void* x, const void* y) {
    float a = *(const float*)x, b = *(const float*)y;
    return (a > b) - (a < b);
}

int main(int argc, char** argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 12;
    int launches = argc > 2 ? atoi(argv[2]) : 15;
    const int n = (1 << 25) - 1;
    const size_t flush_bytes = 256u << 20;
    char* flush;
    CHECK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    float* times = (float*)malloc(launches * sizeof(float));
    for (int t = 0; t < trials; ++t) {
        char* pad;  // kept: the next trial's buffers land elsewhere
        CHECK(cudaMalloc(&pad, ((size_t)(t * 7 % 13) + 1) << 21));
        float *a, *b, *c;
        CHECK(cudaMalloc(&a, n * sizeof(float)));
        CHECK(cudaMalloc(&b, n * sizeof(float)));
        CHECK(cudaMalloc(&c, n * sizeof(float)));
        CHECK(cudaMemset(a, 0x3c, n * sizeof(float)));
        CHECK(cudaMemset(b, 0x3d, n * sizeof(float)));
        unsigned int sm = 0;
        for (int i = 0; i < launches; ++i) {
            CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaEventRecord(e0));
            one_block_add<<<1, 1024>>>(a, b, c, n);
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            CHECK(cudaEventElapsedTime(&times[i], e0, e1));
            CHECK(cudaMemcpyFromSymbol(&sm, g_smid, sizeof(sm)));
        }
        qsort(times, launches, sizeof(float), by_value);
        printf("trial %2d sm %3u median %.4f ms min %.4f max %.4f  a=%p b=%p c=%p\n", t, sm,
               times[launches / 2], times[0], times[launches - 1], (void*)a, (void*)b, (void*)c);
    }
    free(times);
    return 0;
}
