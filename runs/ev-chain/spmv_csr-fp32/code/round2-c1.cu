// SpMV CSR fp32, y = A x.
// One warp owns 32 consecutive rows (128-thread blocks, no __syncthreads, warps independent).
//  1. At kernel entry every cold miss is started at once with non-binding prefetches:
//     the first 8 KB of x (capped at the end of x[0]'s 2 MiB page), the warp's y line, and
//     the base pointers of values / col_indices (translation warm-up, guarded against nullptr).
//  2. row_offsets for the warp's 32 rows (+1) are loaded in a single coalesced request; the
//     warp's segment [S,E) is streamed into a per-warp shared buffer with 4-byte cp.async
//     (no alignment assumptions), in chunks of CAP elements.
//  3. A lane-strided pass replaces each value by values*x[col] (independent gathers), then each
//     lane sums its own row's piece serially in storage order; pieces longer than LONG_ROW are
//     reduced by the whole warp (strided sum + shuffles) for speed and accuracy.
#include <cuda_runtime.h>
#include <stdint.h>

#define WARPS_PER_BLOCK 4
#define THREADS_PER_BLOCK (WARPS_PER_BLOCK * 32)
#define CAP 1024
#define LONG_ROW 64
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" :: "l"(p));
}
__device__ __forceinline__ void prefetch_l1(const void* p) {
    asm volatile("prefetch.global.L1 [%0];" :: "l"(p));
}
__device__ __forceinline__ void cp_async4(uint32_t saddr, const void* gptr) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(saddr), "l"(gptr) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

__global__ void __launch_bounds__(THREADS_PER_BLOCK)
spmv_csr_warp_kernel(int rows, const float* __restrict__ values, const int* __restrict__ col_indices,
                     const int* __restrict__ row_offsets, const float* __restrict__ x,
                     float* __restrict__ y) {
    __shared__ float s_val[WARPS_PER_BLOCK][CAP];
    __shared__ int   s_col[WARPS_PER_BLOCK][CAP];

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int r0 = (blockIdx.x * WARPS_PER_BLOCK + warp) * 32;

    // ---- 1. start the cold misses right away (non-binding prefetches) ----
    if (warp == 0 && x != nullptr) {
        const uintptr_t xa = (uintptr_t)x;
        const uintptr_t line0 = xa & ~(uintptr_t)127;
        const uintptr_t page_end = (xa | (((uintptr_t)2u << 20) - 1)) + 1;   // end of x[0]'s 2 MiB page
        const uintptr_t a0 = line0 + (uintptr_t)lane * 128u;
        const uintptr_t a1 = a0 + (uintptr_t)32 * 128u;
        if (a0 < page_end) { prefetch_l2((const void*)a0); prefetch_l1((const void*)a0); }
        if (a1 < page_end) { prefetch_l2((const void*)a1); prefetch_l1((const void*)a1); }
    }
    if (r0 >= rows) return;   // warp-uniform
    if (lane == 0) {
        prefetch_l2(y + r0);
    } else if (lane == 1) {
        if (values != nullptr) prefetch_l2(values);
    } else if (lane == 2) {
        if (col_indices != nullptr) prefetch_l2(col_indices);
    }

    // ---- 2. row offsets: one coalesced request ----
    const int off = row_offsets[min(r0 + lane, rows)];
    int last = 0;
    if (lane == 31) last = row_offsets[min(r0 + 32, rows)];

    const int b = off;
    int e = __shfl_down_sync(FULL_MASK, off, 1);
    if (lane == 31) e = last;
    const int S = __shfl_sync(FULL_MASK, off, 0);
    const int E = __shfl_sync(FULL_MASK, last, 31);

    float* sv = s_val[warp];
    int*   sc = s_col[warp];
    const uint32_t sv_addr = (uint32_t)__cvta_generic_to_shared(sv);
    const uint32_t sc_addr = (uint32_t)__cvta_generic_to_shared(sc);

    float acc = 0.0f;

    for (int cs = S; cs < E; cs += CAP) {          // warp-uniform chunk loop
        const int n = min(CAP, E - cs);
        const float* gv = values + cs;
        const int*   gc = col_indices + cs;

        // stream col/values of this chunk into shared memory (coalesced 128 B per instruction)
        for (int k = lane; k < n; k += 32) {
            cp_async4(sc_addr + 4u * (uint32_t)k, gc + k);
            cp_async4(sv_addr + 4u * (uint32_t)k, gv + k);
        }
        cp_async_wait_all();
        __syncwarp();

        // products values * x[col], lane-strided, gathers independent
        for (int base = 0; base < n; base += 128) {
            float p[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int kk = base + u * 32 + lane;
                p[u] = 0.0f;
                if (kk < n) p[u] = sv[kk] * __ldg(x + sc[kk]);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int kk = base + u * 32 + lane;
                if (kk < n) sv[kk] = p[u];
            }
        }
        __syncwarp();

        // this lane's row piece inside the chunk: [lo, hi) relative to cs
        const int lo = max(b, cs) - cs;
        const int hi = min(e, cs + n) - cs;
        const bool is_long = (hi - lo) > LONG_ROW;

        if (!is_long) {
            for (int k = lo; k < hi; ++k) acc += sv[k];
        }

        // long pieces: whole warp reduces each one
        unsigned m = __ballot_sync(FULL_MASK, is_long);
        while (m) {
            const int L = __ffs(m) - 1;
            m &= m - 1;
            const int llo = __shfl_sync(FULL_MASK, lo, L);
            const int lhi = __shfl_sync(FULL_MASK, hi, L);
            float s = 0.0f;
            for (int k = llo + lane; k < lhi; k += 32) s += sv[k];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
            if (lane == L) acc += s;
        }
        __syncwarp();   // buffer is reused by the next chunk
    }

    const int r = r0 + lane;
    if (r < rows) y[r] = acc;
}

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        const int warps = (rows + 31) / 32;
        const int blocks = (warps + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
        spmv_csr_warp_kernel<<<blocks, THREADS_PER_BLOCK>>>(rows, values, col_indices,
                                                            row_offsets, x, y);
    }
    cudaDeviceSynchronize();
}
