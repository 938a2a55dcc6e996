// The worker's device-side byte comparison: how many 16-byte words (and tail bytes) of two
// device buffers differ. Used to check that inputs are unchanged and that outputs seen right
// after the call equal those seen after a device-wide synchronize, without copying GiBs to the
// host. Built by the harness itself (cudamaster.bench.helper), never by an implementation.
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void cm_diff_words(const uint4* a, const uint4* b, size_t words,
                              unsigned long long* count) {
    unsigned long long local = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
        uint4 x = a[i], y = b[i];
        local += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
    }
    if (local) atomicAdd(count, local);
}

__global__ void cm_diff_bytes(const unsigned char* a, const unsigned char* b, size_t n,
                              unsigned long long* count) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && a[i] != b[i]) atomicAdd(count, 1ULL);
}

// Returns the number of differing 16-byte words plus differing tail bytes (0: identical), or
// -1 - cudaError on failure. Both pointers must be 16-byte aligned (cudaMalloc's are).
extern "C" long long cm_count_diff(const void* a, const void* b, size_t nbytes) {
    static unsigned long long* count = nullptr;
    cudaError_t err = cudaSuccess;
    if (!count && (err = cudaMalloc(&count, sizeof(*count))) != cudaSuccess) return -1 - err;
    if ((err = cudaMemset(count, 0, sizeof(*count))) != cudaSuccess) return -1 - err;
    size_t words = nbytes / 16, tail = nbytes % 16;
    if (words) {
        size_t blocks = (words + 255) / 256;
        cm_diff_words<<<blocks < 4096 ? (unsigned)blocks : 4096u, 256>>>(
            (const uint4*)a, (const uint4*)b, words, count);
    }
    if (tail) {
        cm_diff_bytes<<<1, 16>>>((const unsigned char*)a + words * 16,
                                 (const unsigned char*)b + words * 16, tail, count);
    }
    unsigned long long host = 0;
    if ((err = cudaMemcpy(&host, count, sizeof(host), cudaMemcpyDeviceToHost)) != cudaSuccess)
        return -1 - err;
    if ((err = cudaGetLastError()) != cudaSuccess) return -1 - err;
    return (long long)host;
}
