// Where does a one-block kernel run, and does its time depend on it? Each process launches a
// one-block, 1024-thread vector add over 2^25 - 1 floats (vector_add's large case 1) after an
// L2-flushing memset, as the harness times it, and prints per launch the SM it ran on (%smid)
// and its event time. Run it as several processes: if each process keeps to one SM and the
// times follow the SM, a one-block kernel's A/A ratio between two processes is placement, not
// the harness.  nvcc -O2 -arch=sm_90 -o probe scripts/placement-probe.cu && ./probe 40
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

int main(int argc, char** argv) {
    int launches = argc > 1 ? atoi(argv[1]) : 40;
    const int n = (1 << 25) - 1;
    const size_t flush_bytes = 256u << 20;
    float *a, *b, *c;
    char* flush;
    CHECK(cudaMalloc(&a, n * sizeof(float)));
    CHECK(cudaMalloc(&b, n * sizeof(float)));
    CHECK(cudaMalloc(&c, n * sizeof(float)));
    CHECK(cudaMalloc(&flush, flush_bytes));
    CHECK(cudaMemset(a, 0x3c, n * sizeof(float)));
    CHECK(cudaMemset(b, 0x3d, n * sizeof(float)));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    printf("pointers a=%p b=%p c=%p flush=%p\n", (void*)a, (void*)b, (void*)c, (void*)flush);
    for (int i = 0; i < launches; ++i) {
        CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaEventRecord(e0));
        one_block_add<<<1, 1024>>>(a, b, c, n);
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        unsigned int sm = 0;
        CHECK(cudaMemcpyFromSymbol(&sm, g_smid, sizeof(sm)));
        printf("launch %d sm %u ms %.4f\n", i, sm, ms);
    }
    return 0;
}
