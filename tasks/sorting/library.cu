// Library baseline: CUB DeviceRadixSort::SortKeys on float keys, through a DoubleBuffer of data and
// a cached alternate buffer; the result is copied back when it ends in the alternate.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

// A device buffer kept between calls and grown when needed.
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

extern "C" void sorting(float* data, int N) {
    static Scratch alt, work;
    if (N > 1) {
        cub::DoubleBuffer<float> keys(data, static_cast<float*>(alt.get((size_t)N * sizeof(float))));
        size_t bytes = 0;
        cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys, N);
        cub::DeviceRadixSort::SortKeys(work.get(bytes), bytes, keys, N);
        if (keys.Current() != data)
            cudaMemcpyAsync(data, keys.Current(), (size_t)N * sizeof(float),
                            cudaMemcpyDeviceToDevice);
    }
    cudaDeviceSynchronize();
}
