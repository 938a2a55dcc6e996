// Library baseline: CUB DeviceRadixSort::SortKeys on __nv_bfloat16 keys (CUB orders them
// numerically; 16-bit keys need only a few digit passes), through a DoubleBuffer of data and a
// cached alternate buffer.
#include <cuda_bf16.h>  // before CUB, which then enables its bf16 key traits
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

extern "C" void sorting_bf16(__nv_bfloat16* data, int N) {
    static Scratch alt, work;
    if (N > 1) {
        size_t n = (size_t)N * sizeof(__nv_bfloat16);
        cub::DoubleBuffer<__nv_bfloat16> keys(data, static_cast<__nv_bfloat16*>(alt.get(n)));
        size_t bytes = 0;
        cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys, N);
        cub::DeviceRadixSort::SortKeys(work.get(bytes), bytes, keys, N);
        if (keys.Current() != data)
            cudaMemcpyAsync(data, keys.Current(), n, cudaMemcpyDeviceToDevice);
    }
    cudaDeviceSynchronize();
}
