// spmv_csr fp32 — round 5 candidate.
//  1. Each block first issues its row_offsets loads, then (without waiting) L2 prefetches:
//       - values / col_indices: the block's guessed slice [R0*G, R1*G), G = 20.5, clipped to a
//         host-computed bound that is known to be mapped: the end of the array's 2 MB page, or,
//         when the guess runs past that page, the end of the allocation (cuMemGetAddressRange via
//         the runtime's driver entry point; queried every call, nothing cached);
//       - row_offsets: the whole array, exact, split over the first 16 blocks;
//       - x: the first 8 KB into L2 (first 4 blocks) and into every SM's L1 (64 lines per block);
//       - y: no prefetch (stores need no fill).
//     Prefetches write no registers and cannot change results.
//  2. Compute (unchanged): a sub-warp of W lanes per row, per chunk of 4*W elements all col/values
//     loads, then all x gathers, then FMAs, then a shuffle reduction.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

#ifndef SPMV_PF_VALCOL
#define SPMV_PF_VALCOL 1
#endif
#ifndef SPMV_PF_X
#define SPMV_PF_X 1
#endif
#ifndef SPMV_PF_X_L1
#define SPMV_PF_X_L1 1
#endif
#ifndef SPMV_PF_ROWOFF
#define SPMV_PF_ROWOFF 1
#endif
#ifndef SPMV_PF_Y
#define SPMV_PF_Y 0
#endif
// Host-side allocation-extent query (option 1c). Set 0 to clip to the first 2 MB page only.
#ifndef SPMV_PF_RANGE_QUERY
#define SPMV_PF_RANGE_QUERY 1
#endif
// Set to 1 ONLY after verifying on the device that an L2 bulk prefetch of an unmapped address is
// dropped silently (no error, later kernels fine, compute-sanitizer clean).
#ifndef SPMV_PF_UNCLAMPED
#define SPMV_PF_UNCLAMPED 0
#endif
// Guessed nnz per row, G = SPMV_G_NUM / SPMV_G_DEN (default 20.5).
#ifndef SPMV_G_NUM
#define SPMV_G_NUM 41
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
#ifndef SPMV_XL1_BYTES
#define SPMV_XL1_BYTES 8192
#endif
#ifndef SPMV_ROWOFF_PF_BLOCKS
#define SPMV_ROWOFF_PF_BLOCKS 16
#endif
// Sub-warp width selection: rows <= W32_MAX -> 32, rows <= W16_MAX -> 16, else 8.
#ifndef SPMV_W32_MAX_ROWS
#define SPMV_W32_MAX_ROWS 4096
#endif
#ifndef SPMV_W16_MAX_ROWS
#define SPMV_W16_MAX_ROWS 8192
#endif

namespace {

constexpr int kThreads = 256;
constexpr int kPerLane = 4;  // elements per lane per chunk (chunk = kPerLane * W)
constexpr unsigned long long kPageBytes = 2ull << 20;
constexpr unsigned long long kMaxBulk = 65536;
constexpr int kXL1Lines = SPMV_XL1_BYTES / 128;
static_assert(kXL1Lines <= 128, "x L1 prefetch uses threads 128..255 at most");

// Exclusive upper address bounds, each known to be mapped from the array start up to it.
struct PfBounds {
    unsigned long long v_end;
    unsigned long long c_end;
    unsigned long long x_end;
};

// [lo, hi): both 16-byte aligned.
__device__ __forceinline__ void bulk_prefetch_l2(unsigned long long lo, unsigned long long hi) {
    while (lo < hi) {
        const unsigned long long n = hi - lo;
        const uint32_t c = (uint32_t)(n > kMaxBulk ? kMaxBulk : n);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(lo), "r"(c) : "memory");
        lo += c;
    }
}

// Prefetch bytes [p, p+bytes) that are known to be valid. Rounding out to 16 bytes never leaves
// the 16-byte chunks that hold the first and last valid bytes.
__device__ __forceinline__ void prefetch_exact(const void* p, size_t bytes) {
    if (p == nullptr || bytes == 0) return;
    const unsigned long long lo = (unsigned long long)(uintptr_t)p & ~15ull;
    const unsigned long long hi = ((unsigned long long)(uintptr_t)p + bytes + 15) & ~15ull;
    bulk_prefetch_l2(lo, hi);
}

// Prefetch a guessed range [base+off, base+off+bytes), clipped to `end` (mapped from base up to
// end). Rounding lo down / hi up to 16 bytes stays inside 16-byte chunks holding mapped bytes.
__device__ __forceinline__ void prefetch_clipped(const void* base, size_t off, size_t bytes,
                                                 unsigned long long end) {
    if (base == nullptr || bytes == 0) return;
    unsigned long long lo = (unsigned long long)(uintptr_t)base + off;
    unsigned long long hi = lo + bytes;
    if (hi > end) hi = end;
    if (lo >= hi) return;
    lo &= ~15ull;
    hi = (hi + 15) & ~15ull;
    bulk_prefetch_l2(lo, hi);
}

template <int W>
__global__ void __launch_bounds__(kThreads)
spmv_csr_subwarp_kernel(int rows, const float* __restrict__ values,
                        const int* __restrict__ col_indices,
                        const int* __restrict__ row_offsets,
                        const float* __restrict__ x, float* __restrict__ y, PfBounds pb) {
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

    // ---- Prefetches, issued without waiting for row_offsets; different warps in parallel. ----
    const int R1 = min(R0 + RPB, rows);
    if (tid == 0) {
#if SPMV_PF_VALCOL
        const size_t lo = (size_t)R0 * SPMV_G_NUM / SPMV_G_DEN;
        const size_t hi = (size_t)R1 * SPMV_G_NUM / SPMV_G_DEN;
        if (hi > lo)
            prefetch_clipped(values, lo * sizeof(float), (hi - lo) * sizeof(float), pb.v_end);
#endif
    } else if (tid == 32) {
#if SPMV_PF_VALCOL
        const size_t lo = (size_t)R0 * SPMV_G_NUM / SPMV_G_DEN;
        const size_t hi = (size_t)R1 * SPMV_G_NUM / SPMV_G_DEN;
        if (hi > lo)
            prefetch_clipped(col_indices, lo * sizeof(int), (hi - lo) * sizeof(int), pb.c_end);
#endif
    } else if (tid == 64) {
#if SPMV_PF_ROWOFF
        if (blockIdx.x < (unsigned)SPMV_ROWOFF_PF_BLOCKS) {
            const size_t total = (size_t)(rows + 1) * sizeof(int);
            const size_t piece =
                (((total + SPMV_ROWOFF_PF_BLOCKS - 1) / SPMV_ROWOFF_PF_BLOCKS) + 15) & ~(size_t)15;
            const size_t lo = (size_t)blockIdx.x * piece;
            if (lo < total) {
                const size_t n = (total - lo) < piece ? (total - lo) : piece;
                prefetch_exact((const char*)row_offsets + lo, n);
            }
        }
#endif
    } else if (tid == 96) {
#if SPMV_PF_X
        constexpr size_t piece = (size_t)SPMV_XPF_BYTES / SPMV_XPF_PIECES;
        for (unsigned p = blockIdx.x; p < (unsigned)SPMV_XPF_PIECES; p += gridDim.x)
            prefetch_clipped(x, (size_t)p * piece, piece, pb.x_end);
#endif
#if SPMV_PF_Y
    } else if (tid == 224) {
        if (R1 > R0) prefetch_exact(y + R0, (size_t)(R1 - R0) * sizeof(float));
#endif
    }
#if SPMV_PF_X_L1
    {
        const int i = tid - 128;
        if (i >= 0 && i < kXL1Lines) {
            const unsigned long long line =
                ((unsigned long long)(uintptr_t)x & ~127ull) + (unsigned long long)i * 128ull;
            if (x != nullptr && line < pb.x_end)
                asm volatile("prefetch.global.L1 [%0];" ::"l"(line) : "memory");
        }
    }
#endif

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

    // One warp store instruction: the active lanes (0, W, 2W, ...) write consecutive floats.
    if (lane == 0 && r < rows) y[r] = acc;  // empty rows write 0
}

// ---------------- Host side: the clip bounds ----------------
typedef int (*MemGetAddressRangeFn)(unsigned long long* pbase, size_t* psize,
                                    unsigned long long dptr);

#if SPMV_PF_RANGE_QUERY && !SPMV_PF_UNCLAMPED
MemGetAddressRangeFn load_range_fn() {
    void* p = nullptr;
    cudaError_t err;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    err = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &q);
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess) p = nullptr;
#elif CUDART_VERSION >= 12000
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    err = cudaGetDriverEntryPoint("cuMemGetAddressRange", &p, cudaEnableDefault, &q);
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess) p = nullptr;
#else
    err = cudaGetDriverEntryPoint("cuMemGetAddressRange", &p, cudaEnableDefault);
    if (err != cudaSuccess) p = nullptr;
#endif
    if (err != cudaSuccess) (void)cudaGetLastError();  // do not leave our lookup's error behind
    return (MemGetAddressRangeFn)p;
}

MemGetAddressRangeFn range_fn() {
    static MemGetAddressRangeFn fn = load_range_fn();  // the function pointer only, not a range
    return fn;
}
#endif

inline unsigned long long page_end_of(const void* p) {
    return ((unsigned long long)(uintptr_t)p & ~(kPageBytes - 1)) + kPageBytes;
}

// Bound for a guessed range starting at p and spanning up to guess_bytes.
inline unsigned long long guess_bound(const void* p, unsigned long long guess_bytes) {
    if (p == nullptr) return 0;
#if SPMV_PF_UNCLAMPED
    (void)guess_bytes;
    return ~0ull;
#else
    const unsigned long long a = (unsigned long long)(uintptr_t)p;
    unsigned long long end = page_end_of(p);
#if SPMV_PF_RANGE_QUERY
    if (a + guess_bytes > end) {  // only then can the allocation extent extend the clip
        const MemGetAddressRangeFn fn = range_fn();
        if (fn != nullptr) {
            unsigned long long base = 0;
            size_t size = 0;
            if (fn(&base, &size, a) == 0 && base <= a && base + size > a && base + size > end)
                end = base + size;
        }
    }
#else
    (void)guess_bytes;
#endif
    return end;
#endif
}

template <int W>
inline void launch(int rows, const float* values, const int* col_indices, const int* row_offsets,
                   const float* x, float* y, const PfBounds& pb) {
    constexpr int RPB = kThreads / W;
    const unsigned grid = (unsigned)((rows + RPB - 1) / RPB);
    spmv_csr_subwarp_kernel<W><<<grid, kThreads>>>(rows, values, col_indices, row_offsets, x, y,
                                                   pb);
}

}  // namespace

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        const unsigned long long guess_elems =
            (unsigned long long)rows * SPMV_G_NUM / SPMV_G_DEN + 1;
        PfBounds pb;
        pb.v_end = guess_bound(values, guess_elems * sizeof(float));
        pb.c_end = guess_bound(col_indices, guess_elems * sizeof(int));
#if SPMV_PF_UNCLAMPED
        // cols is unknown here; x is only ever prefetched within its own 2 MB page.
        pb.x_end = x ? page_end_of(x) : 0;
#else
        pb.x_end = x ? page_end_of(x) : 0;
#endif
        if (rows <= SPMV_W32_MAX_ROWS)
            launch<32>(rows, values, col_indices, row_offsets, x, y, pb);
        else if (rows <= SPMV_W16_MAX_ROWS)
            launch<16>(rows, values, col_indices, row_offsets, x, y, pb);
        else
            launch<8>(rows, values, col_indices, row_offsets, x, y, pb);
    }
    cudaDeviceSynchronize();
}
