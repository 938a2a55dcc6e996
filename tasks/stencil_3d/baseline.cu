// Naive FP32 baseline: the interior kernel, then the boundary copy kernel, both on 4x4x4 blocks
// with one thread per cell (x -> k, contiguous; y -> j; z -> i). u_new is the output, u_old the
// input. The neighbour sum is evaluated in the spec's order.
#include <cuda_runtime.h>

__global__ void stencil_3d_interior(float* u_new, const float* u_old, float r, int nx, int ny,
                                    int nz) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int i = blockIdx.z * blockDim.z + threadIdx.z;
    if (i < 1 || i > nx - 2 || j < 1 || j > ny - 2 || k < 1 || k > nz - 2) return;
    const size_t sj = (size_t)nz, si = (size_t)ny * nz;
    size_t p = ((size_t)i * ny + j) * nz + k;
    float c = u_old[p];
    u_new[p] = c + r * (u_old[p - si] + u_old[p + si] + u_old[p + sj] + u_old[p - sj] +
                        u_old[p + 1] + u_old[p - 1] - 6.0f * c);
}

__global__ void stencil_3d_boundary(float* u_new, const float* u_old, int nx, int ny, int nz) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int i = blockIdx.z * blockDim.z + threadIdx.z;
    if (i >= nx || j >= ny || k >= nz) return;
    if (i == 0 || i == nx - 1 || j == 0 || j == ny - 1 || k == 0 || k == nz - 1) {
        size_t p = ((size_t)i * ny + j) * nz + k;
        u_new[p] = u_old[p];
    }
}

extern "C" void stencil_3d(float* u_new, const float* u_old, float r, int nx, int ny, int nz) {
    if (nx > 0 && ny > 0 && nz > 0) {
        dim3 block(4, 4, 4);
        dim3 grid((nz + 3) / 4, (ny + 3) / 4, (nx + 3) / 4);
        stencil_3d_interior<<<grid, block>>>(u_new, u_old, r, nx, ny, nz);
        stencil_3d_boundary<<<grid, block>>>(u_new, u_old, nx, ny, nz);
    }
    cudaDeviceSynchronize();
}
