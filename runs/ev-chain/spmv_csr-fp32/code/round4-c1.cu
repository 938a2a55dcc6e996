// spmv_csr fp32 — round 4 candidate.
//  1. Each block first issues its row_offsets loads. It then immediately issues L2 prefetches
//     (cp.async.bulk.prefetch.L2, one elected thread per array) and does not wait for the loads:
//       - values / col_indices: the block's guessed slice [R0*G, R1*G) (G ~ expected nnz/row),
//       - x: the first SPMV_XPF_BYTES, split over the first few blocks,
//       - y: the block's own y range (exact, always in bounds).
//     Prefetches write no registers and cannot change results. A guessed range may run past the
//     end of the array, so by default it is clipped to the 2 MB-aligned region that holds a
//     known-valid address of that array (device memory is mapped in 2 MB units).
//  2. Compute: a sub-warp of W lanes per row (W = 32 / 16 / 8 chosen from rows on the host), no
//     shared memory. Per chunk of 4*W elements, all col/values loads go out together, then all
//     x gathers, then FMAs; the sub-warp is then reduced with shuffles. Long rows loop over chunks.
//  3. y is written with a plain store to lines the y prefetch has already pulled into L2.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

#ifndef SPMV_PF_VALCOL
#define SPMV_PF_VALCOL 1
#endif
#ifndef SPMV_PF_X
#define SPMV_PF_X 1
#endif
#ifndef SPMV_PF_Y
#define SPMV_PF_Y 1
#endif
// Set to 1 ONLY after verifying on the device that an L2 prefetch of an unmapped address is dropped.
#ifndef SPMV_PF_UNCLAMPED
#define SPMV_PF_UNCLAMPED 0
#endif
// Guessed nnz per row, G = SPMV_G_NUM / SPMV_G_DEN (default 21.5).
#ifndef SPMV_G_NUM
#define SPMV_G_NUM 43
#endif
#ifndef SPMV_G_DEN
#define SPMV_G_DEN 2
#endif
#ifndef SPMV_XPF_BYTES
#define SPMV_XPF_BYTES 8192
#endif
#ifndef SPMV_XPF_PIECES
#define SPMV_XPF_PIECES 4
#endif

namespace {

constexpr int kThreads = 256;
constexpr int kPerLane = 4;  // elements per lane per chunk (chunk = kPerLane * W)
constexpr uintptr_t kPageBytes = (uintptr_t)2 << 20;
constexpr uintptr_t kMaxBulk = 65536;

// [lo, hi): both 16-byte aligned.
__device__ __forceinline__ void bulk_prefetch_l2(uintptr_t lo, uintptr_t hi) {
    while (lo < hi) {
        const uintptr_t n = hi - lo;
        const uint32_t c = (uint32_t)(n > kMaxBulk ? kMaxBulk : n);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"((uint64_t)lo), "r"(c)
                     : "memory");
        lo += c;
    }
}

// Prefetch bytes [p, p+bytes) that are known to be valid. Rounding out to 16 bytes never leaves
// the 16-byte chunks that hold the first and last valid bytes, so it never reaches another page.
__device__ __forceinline__ void prefetch_exact(const void* p, size_t bytes) {
    if (p == nullptr || bytes == 0) return;
    const uintptr_t lo = (uintptr_t)p & ~(uintptr_t)15;
    const uintptr_t hi = ((uintptr_t)p + bytes + 15) & ~(uintptr_t)15;
    bulk_prefetch_l2(lo, hi);
}

// Prefetch a guessed range [anchor+off, anchor+off+bytes) that may run past the end of the array.
// Clipped (by default) to the 2 MB-aligned region containing the valid address `anchor`.
__device__ __forceinline__ void prefetch_guess(const void* anchor, size_t off_bytes, size_t bytes) {
    if (anchor == nullptr || bytes == 0) return;
    uintptr_t lo = (uintptr_t)anchor + off_bytes;
    uintptr_t hi = lo + bytes;
#if !SPMV_PF_UNCLAMPED
    const uintptr_t pg_hi = ((uintptr_t)anchor & ~(kPageBytes - 1)) + kPageBytes;
    if (hi > pg_hi) hi = pg_hi;
#endif
    if (lo >= hi) return;
    lo &= ~(uintptr_t)15;                     // stays >= page start (page start is 16B-aligned)
    hi = (hi + 15) & ~(uintptr_t)15;          // stays <= page end (page end is 16B-aligned)
    bulk_prefetch_l2(lo, hi);
}

template <int W>
__global__ void __launch_bounds__(kThreads)
spmv_csr_subwarp_kernel(int rows, const float* __restrict__ values,
                        const int* __restrict__ col_indices,
                        const int* __restrict__ row_offsets,
                        const float* __restrict__ x, float* __restrict__ y) {
    constexpr int RPB = kThreads / W;  // rows per block
    const int tid = threadIdx.x;
    const int lane = tid & (W - 1);
    const int R0 = blockIdx.x * RPB;
    const int r = R0 + tid / W;

    // ---- Round 1: the real row_offsets loads go out first. ----
    int s = 0, e = 0;
    if (r < rows) {
        s = row_offsets[r];
        e = row_offsets[r + 1];
    }

    // ---- L2 prefetches, issued without waiting for row_offsets. One elected thread per array,
    //      each in a different warp so they issue in parallel. ----
    const int R1 = min(R0 + RPB, rows);
    if (tid == 0) {
#if SPMV_PF_VALCOL
        const size_t lo = (size_t)R0 * SPMV_G_NUM / SPMV_G_DEN;
        const size_t hi = (size_t)R1 * SPMV_G_NUM / SPMV_G_DEN;
        if (hi > lo) prefetch_guess(values, lo * sizeof(float), (hi - lo) * sizeof(float));
#endif
    } else if (tid == 32) {
#if SPMV_PF_VALCOL
        const size_t lo = (size_t)R0 * SPMV_G_NUM / SPMV_G_DEN;
        const size_t hi = (size_t)R1 * SPMV_G_NUM / SPMV_G_DEN;
        if (hi > lo) prefetch_guess(col_indices, lo * sizeof(int), (hi - lo) * sizeof(int));
#endif
    } else if (tid == 64) {
#if SPMV_PF_Y
        if (R1 > R0) prefetch_exact(y + R0, (size_t)(R1 - R0) * sizeof(float));
#endif
    } else if (tid == 96) {
#if SPMV_PF_X
        constexpr size_t piece = (size_t)SPMV_XPF_BYTES / SPMV_XPF_PIECES;
        for (unsigned p = blockIdx.x; p < (unsigned)SPMV_XPF_PIECES; p += gridDim.x)
            prefetch_guess(x, (size_t)p * piece, piece);
#endif
    }

    // ---- Rounds 2 and 3: per chunk, all col/values loads together, then all x gathers. ----
    float acc = 0.0f;
    for (int base = s; base < e; base += kPerLane * W) {
        int c[kPerLane];
        float v[kPerLane];
        bool ok[kPerLane];
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
            const int j = base + k * W + lane;
            ok[k] = j < e;
            c[k] = 0;
            v[k] = 0.0f;
            if (ok[k]) {
                c[k] = __ldg(col_indices + j);
                v[k] = __ldg(values + j);
            }
        }
        float xv[kPerLane];
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) xv[k] = ok[k] ? __ldg(x + c[k]) : 0.0f;
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) acc = fmaf(v[k], xv[k], acc);
    }

    // ---- Sub-warp reduction (every lane of the warp reaches this point). ----
#pragma unroll
    for (int off = W / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off, W);

    if (lane == 0 && r < rows) y[r] = acc;  // empty rows write 0
}

template <int W>
inline void launch(int rows, const float* values, const int* col_indices, const int* row_offsets,
                   const float* x, float* y) {
    constexpr int RPB = kThreads / W;
    const unsigned grid = (unsigned)((rows + RPB - 1) / RPB);
    spmv_csr_subwarp_kernel<W><<<grid, kThreads>>>(rows, values, col_indices, row_offsets, x, y);
}

}  // namespace

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        if (rows <= 4096)
            launch<32>(rows, values, col_indices, row_offsets, x, y);
        else if (rows <= 8192)
            launch<16>(rows, values, col_indices, row_offsets, x, y);
        else
            launch<8>(rows, values, col_indices, row_offsets, x, y);
    }
    cudaDeviceSynchronize();
}
