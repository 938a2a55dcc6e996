// Library baseline: CUB DeviceRadixSort::SortPairsDescending of (value, index) pairs, keys read
// straight from input, values from a cached index table 0..N-1; the first k sorted pairs are
// copied out. Radix sort is stable, so equal values keep ascending index; CUB treats -0.0 and
// +0.0 as equal keys. Sorted buffers, the index table and CUB's temp storage are cached.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

struct Scratch {
    void* p = nullptr;
    size_t cap = 0;
    void* get(size_t bytes) {
        if (bytes > cap) {
            cudaFree(p);
            p = nullptr;
            cap = 0;
            if (cudaMalloc(&p, bytes) == cudaSuccess) cap = bytes;
        }
        return p;
    }
};

__global__ void iota_kernel(int* idx, int N) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < N) idx[t] = t;
}

// The index table 0..n-1, rebuilt only when a larger N is seen.
static const int* index_table(int N) {
    static Scratch table;
    static int have = 0;
    int* p = static_cast<int*>(table.get((size_t)N * sizeof(int)));
    if (N > have) {
        iota_kernel<<<(N + 255) / 256, 256>>>(p, N);
        have = N;
    }
    return p;
}

extern "C" void top_k(float* top_k_values, int* top_k_indices, const float* input, const int N,
                      const int k) {
    static Scratch keys, vals, work;
    if (N > 0 && k > 0) {
        const int* idx = index_table(N);
        float* keys_out = static_cast<float*>(keys.get((size_t)N * sizeof(float)));
        int* vals_out = static_cast<int*>(vals.get((size_t)N * sizeof(int)));
        size_t bytes = 0;
        cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, input, keys_out, idx, vals_out,
                                                  N);
        cub::DeviceRadixSort::SortPairsDescending(work.get(bytes), bytes, input, keys_out, idx,
                                                  vals_out, N);
        size_t kk = (size_t)(k < N ? k : N);
        cudaMemcpyAsync(top_k_values, keys_out, kk * sizeof(float), cudaMemcpyDeviceToDevice);
        cudaMemcpyAsync(top_k_indices, vals_out, kk * sizeof(int), cudaMemcpyDeviceToDevice);
    }
    cudaDeviceSynchronize();
}
