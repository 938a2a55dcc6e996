// SpMV CSR fp32, round 7.
// - Each block first issues its row_offsets loads, then cp.async-copies x[0..K) into shared
//   memory (K <= 2048, clipped so the read never leaves the 2 MiB-aligned window holding x[0]).
// - 4 lanes per row, 12 elements per lane: every paper-suite row (mean ~20.5) fits in one
//   48-element window, and all of that window's values/col loads are issued before the one barrier.
// - The gathers read shared memory for c < K and global memory otherwise, so the result is
//   exact for every cols. Rows longer than the window loop over more windows after the barrier.
// - Sub-warp shuffle reduction, then one coalesced y store per row.
#include <cuda_runtime.h>
#include <stdint.h>

#define LPR 4                 // lanes per row
#define EPL 12                // elements per lane per window
#define WIN (LPR * EPL)       // window length (48)
#define XS 2048               // floats of x staged in shared memory

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];\n" :: "l"(p));
}

__global__ void __launch_bounds__(512, 2)
spmv_csr_kernel(int rows, const float* __restrict__ values, const int* __restrict__ col_indices,
                const int* __restrict__ row_offsets, const float* __restrict__ x,
                float* __restrict__ y, int K, int vec16) {
    __shared__ __align__(16) float xs[XS];

    const int tid = threadIdx.x;
    const int rpb = blockDim.x / LPR;
    const int row0 = blockIdx.x * rpb;
    const int row = row0 + tid / LPR;
    const int sub = tid & (LPR - 1);

    // 1) row_offsets trip first.
    int start = 0, end = 0;
    if (row < rows) {
        start = __ldg(row_offsets + row);
        end = __ldg(row_offsets + row + 1);
    }

    // 2) x -> shared, in parallel with the row_offsets trip.
    if (vec16) {
        const int n4 = K >> 2;
        for (int i = tid; i < n4; i += blockDim.x) cp_async16(xs + 4 * i, x + 4 * i);
    } else {
        for (int i = tid; i < K; i += blockDim.x) cp_async4(xs + i, x + i);
    }

    // 3) Warm the y line / translation for the final store (row0 < rows always).
    if (tid == 0) prefetch_l2(y + row0);

    // 4) Issue the whole first window of values/cols into registers.
    const int len = end - start;
    const float* vp = values + start;
    const int* cp = col_indices + start;

    float v[EPL];
    int c[EPL];
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
        const int e = sub + k * LPR;
        if (e < len) {
            v[k] = __ldg(vp + e);
            c[k] = __ldg(cp + e);
        } else {
            v[k] = 0.0f;
            c[k] = 0;
        }
    }

    // 5) Unconditional barrier: x is in shared memory after it.
    cp_async_wait_all();
    __syncthreads();

    // 6) Gather + FMA for the first window.
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
        const int e = sub + k * LPR;
        if (e < len) {
            const int cc = c[k];
            const float xv = (cc < K) ? xs[cc] : __ldg(x + cc);
            acc = fmaf(v[k], xv, acc);
        }
    }

    // 7) Long rows (heavy-tailed / hub / dense): further windows.
    for (int base = WIN; base < len; base += WIN) {
#pragma unroll
        for (int k = 0; k < EPL; ++k) {
            const int e = base + sub + k * LPR;
            if (e < len) {
                v[k] = __ldg(vp + e);
                c[k] = __ldg(cp + e);
            } else {
                v[k] = 0.0f;
                c[k] = 0;
            }
        }
#pragma unroll
        for (int k = 0; k < EPL; ++k) {
            const int e = base + sub + k * LPR;
            if (e < len) {
                const int cc = c[k];
                const float xv = (cc < K) ? xs[cc] : __ldg(x + cc);
                acc = fmaf(v[k], xv, acc);
            }
        }
    }

    // 8) Sub-warp reduction (all lanes of the warp take part) and one store per row.
    acc += __shfl_down_sync(0xffffffffu, acc, 2, LPR);
    acc += __shfl_down_sync(0xffffffffu, acc, 1, LPR);
    if (sub == 0 && row < rows) y[row] = acc;
}

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        // How much of x may be staged: up to XS floats, never past the 2 MiB-aligned
        // window that holds x[0] (device memory is mapped in whole 2 MiB pages).
        int K = 0;
        int vec16 = 0;
        if (x != nullptr) {
            const uintptr_t xa = (uintptr_t)x;
            const uintptr_t win_end = (xa | (uintptr_t)0x1FFFFF) + 1;
            const uintptr_t avail = (win_end - xa) / sizeof(float);
            K = (avail < (uintptr_t)XS) ? (int)avail : XS;
            vec16 = ((xa & 15) == 0) ? 1 : 0;   // then K is a multiple of 4 as well
            if (vec16 && (K & 3)) vec16 = 0;
        }

        // Block size: 512 threads when the grid still covers every SM, else shrink to 128.
        const int num_sms = 132;
        int threads = 128;
        const int cand[3] = {512, 256, 128};
        for (int i = 0; i < 3; ++i) {
            const int rpb = cand[i] / LPR;
            const int nb = (rows + rpb - 1) / rpb;
            if (nb >= num_sms) { threads = cand[i]; break; }
        }
        const int rpb = threads / LPR;
        const int blocks = (rows + rpb - 1) / rpb;
        spmv_csr_kernel<<<blocks, threads>>>(rows, values, col_indices, row_offsets, x, y, K,
                                             vec16);
    }
    cudaDeviceSynchronize();
}
