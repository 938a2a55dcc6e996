// cudamaster dispatch: spmv_csr() runs path 2 when rows < 2897, else path 0 (predicted weighted speedup 1.05x)
#include <cuda_runtime.h>
#include <stdint.h>

namespace cm_path0 {
// Vector CSR SpMV (fp32), round 2.
// - A group of L lanes per row (R = 32/L rows per warp). L is chosen so that the grid is resident
//   in one wave at <= 64 registers (__launch_bounds__(128, 8)): 32768 rows x L=4 -> 1024 blocks
//   against 132 SMs x 8 blocks.
// - One predicated batch of B elements per lane (B*L >= 48 elements per row): all column loads,
//   then all value loads, then all x gathers, then the FMAs. So a typical row costs one dependent
//   round trip. Longer rows (heavy-tailed, hub or dense rows) loop over further batches.
// - Shuffle-xor reduction inside the group. The row sums are then moved into lanes 0..R-1, and
//   each warp writes its R outputs with one coalesced store.


#define SPMV_BLOCK 128
#define SPMV_MIN_BLOCKS 8

// Predicated loads: when pred is false, no memory access is made and the result is 0.
// NA = true uses L1::no_allocate (streaming); NA = false uses the normal (L1-allocating) nc path.
template <bool NA>
__device__ __forceinline__ float ldp_f32(const float* p, int pred) {
    float v;
    if (NA) {
        asm("{\n\t.reg .pred q;\n\t"
            "setp.ne.s32 q, %2, 0;\n\t"
            "mov.f32 %0, 0f00000000;\n\t"
            "@q ld.global.nc.L1::no_allocate.f32 %0, [%1];\n\t}"
            : "=f"(v) : "l"(p), "r"(pred));
    } else {
        asm("{\n\t.reg .pred q;\n\t"
            "setp.ne.s32 q, %2, 0;\n\t"
            "mov.f32 %0, 0f00000000;\n\t"
            "@q ld.global.nc.f32 %0, [%1];\n\t}"
            : "=f"(v) : "l"(p), "r"(pred));
    }
    return v;
}

template <bool NA>
__device__ __forceinline__ int ldp_s32(const int* p, int pred) {
    int v;
    if (NA) {
        asm("{\n\t.reg .pred q;\n\t"
            "setp.ne.s32 q, %2, 0;\n\t"
            "mov.u32 %0, 0;\n\t"
            "@q ld.global.nc.L1::no_allocate.s32 %0, [%1];\n\t}"
            : "=r"(v) : "l"(p), "r"(pred));
    } else {
        asm("{\n\t.reg .pred q;\n\t"
            "setp.ne.s32 q, %2, 0;\n\t"
            "mov.u32 %0, 0;\n\t"
            "@q ld.global.nc.s32 %0, [%1];\n\t}"
            : "=r"(v) : "l"(p), "r"(pred));
    }
    return v;
}

template <int L, int B, bool NA>
__global__ void __launch_bounds__(SPMV_BLOCK, SPMV_MIN_BLOCKS)
spmv_csr_batch_kernel(int rows, const float* __restrict__ values,
                      const int* __restrict__ col_indices,
                      const int* __restrict__ row_offsets,
                      const float* __restrict__ x, float* __restrict__ y) {
    constexpr int R = 32 / L;            // rows per warp
    const int lane = threadIdx.x & 31;
    const long long warp_global =
        ((long long)blockIdx.x * SPMV_BLOCK + threadIdx.x) >> 5;
    const long long row0_ll = warp_global * R;
    if (row0_ll >= (long long)rows) return;   // warp-uniform exit
    const int row0 = (int)row0_ll;

    // Coalesced load of the warp's R + 1 offsets (clamped to rows, which is a valid index).
    int o = 0;
    if (lane <= R) {
        int idx = row0 + lane;
        if (idx > rows) idx = rows;
        o = __ldg(row_offsets + idx);
    }
    const int g = lane / L;          // group (row) within the warp
    const int gl = lane & (L - 1);   // lane within the group
    const int start = __shfl_sync(0xffffffffu, o, g);
    const int end = __shfl_sync(0xffffffffu, o, g + 1);

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

    for (int j = start + gl; j < end; j += B * L) {
        const int rem = end - j;     // > 0
        int c[B];
        float v[B];
        float xv[B];
#pragma unroll
        for (int k = 0; k < B; ++k)
            c[k] = ldp_s32<NA>(col_indices + j + k * L, (k * L < rem) ? 1 : 0);
#pragma unroll
        for (int k = 0; k < B; ++k)
            v[k] = ldp_f32<NA>(values + j + k * L, (k * L < rem) ? 1 : 0);
#pragma unroll
        for (int k = 0; k < B; ++k)
            xv[k] = ldp_f32<false>(x + c[k], (k * L < rem) ? 1 : 0);
#pragma unroll
        for (int k = 0; k < B; ++k)
            acc[k & 3] = fmaf(v[k], xv[k], acc[k & 3]);
    }

    float s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, off, L);

    // Every lane of group g holds row g's sum. Bring the R sums into lanes 0..R-1.
    const float out = __shfl_sync(0xffffffffu, s, (lane & (R - 1)) * L);
    if (lane < R && row0 + lane < rows) y[row0 + lane] = out;
}

template <int L, int B, bool NA>
static void launch_spmv(int rows, const float* values, const int* col_indices,
                        const int* row_offsets, const float* x, float* y) {
    const long long threads_total = (long long)rows * L;
    const long long blocks = (threads_total + SPMV_BLOCK - 1) / SPMV_BLOCK;
    spmv_csr_batch_kernel<L, B, NA><<<(unsigned int)blocks, SPMV_BLOCK>>>(
        rows, values, col_indices, row_offsets, x, y);
}

 void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        if (rows <= 2048)
            launch_spmv<32, 2, true>(rows, values, col_indices, row_offsets, x, y);
        else if (rows <= 4096)
            launch_spmv<16, 3, true>(rows, values, col_indices, row_offsets, x, y);
        else if (rows <= 16384)
            launch_spmv<8, 6, true>(rows, values, col_indices, row_offsets, x, y);
        else
            launch_spmv<4, 12, false>(rows, values, col_indices, row_offsets, x, y);
    }
    cudaDeviceSynchronize();
}
}  // namespace cm_path0
#undef SPMV_BLOCK
#undef SPMV_MIN_BLOCKS

namespace cm_path2 {
// CSR SpMV (fp32), y = A x.
//  * Large row counts: persistent-style grid (numSMs x 4 blocks of 256 threads); each block owns a
//    contiguous row range [R0, R1). Warp 0 issues Hopper bulk L2 prefetches (TMA engine,
//    cp.async.bulk.prefetch.L2) for the block's row_offsets slice, then -- after loading ro[R0] and
//    ro[R1] -- for the block's whole values / col_indices span (16B-aligned, <=64 KB chunks, never
//    outside the arrays). All warps then run a CSR-vector loop (L lanes per row) over the block's
//    rows; their loads hit L2 or merge with fills already in flight.
//  * Small row counts: round1-c1's vector kernel (L = 32/16/8 picked from the row count).



#define SPMV_BLOCK 128

#ifndef SPMV_PF_MIN_ROWS
#define SPMV_PF_MIN_ROWS 8192      // rows >= this use the L2-prefetch kernel
#endif
#ifndef SPMV_PF_L
#define SPMV_PF_L 8                // lanes per row in the prefetch kernel
#endif
#ifndef SPMV_PF_BLOCKS_PER_SM
#define SPMV_PF_BLOCKS_PER_SM 4
#endif
#define SPMV_PF_BLOCK 256
#define SPMV_PF_CHUNK 65536u       // bytes per bulk prefetch instruction (multiple of 16)

__device__ __forceinline__ float ld_stream_f32(const float* p) {
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ int ld_stream_s32(const int* p) {
    int v;
    asm("ld.global.nc.L1::no_allocate.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

// ---------------------------------------------------------------------------------------------
// Bulk L2 prefetch helpers (sm_90+).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void prefetch_l2_bulk(uintptr_t addr, unsigned bytes) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(addr), "r"(bytes));
#else
    (void)addr; (void)bytes;
#endif
}

// Prefetch the bytes [begin, end) into L2, shrunk inward to 16-byte alignment (so nothing outside
// the range is touched). Chunks are strided over `nlanes` cooperating lanes (this lane = `li`).
__device__ __forceinline__ void prefetch_range_l2(const void* begin, const void* end, int li,
                                                  int nlanes) {
    const uintptr_t a = ((uintptr_t)begin + 15u) & ~(uintptr_t)15u;
    const uintptr_t b = (uintptr_t)end & ~(uintptr_t)15u;
    if (b <= a) return;
    const size_t n = (size_t)(b - a);
    for (size_t off = (size_t)li * SPMV_PF_CHUNK; off < n;
         off += (size_t)nlanes * SPMV_PF_CHUNK) {
        size_t sz = n - off;
        if (sz > SPMV_PF_CHUNK) sz = SPMV_PF_CHUNK;
        prefetch_l2_bulk(a + off, (unsigned)sz);   // sz is a multiple of 16
    }
}

// ---------------------------------------------------------------------------------------------
// round1-c1 kernel (small row counts).
// ---------------------------------------------------------------------------------------------
template <int L>
__global__ void __launch_bounds__(SPMV_BLOCK)
spmv_csr_vector_kernel(int rows, const float* __restrict__ values,
                       const int* __restrict__ col_indices,
                       const int* __restrict__ row_offsets,
                       const float* __restrict__ x, float* __restrict__ y) {
    constexpr int ROWS_PER_WARP = 32 / L;
    const int lane = threadIdx.x & 31;
    const long long warp_global =
        ((long long)blockIdx.x * SPMV_BLOCK + threadIdx.x) >> 5;
    const long long row0_ll = warp_global * ROWS_PER_WARP;
    const int row0 = row0_ll < (long long)rows ? (int)row0_ll : rows;

    int o = 0;
    if (lane <= ROWS_PER_WARP) {
        int idx = row0 + lane;
        if (idx > rows) idx = rows;
        o = __ldg(row_offsets + idx);
    }
    const int g = lane / L;
    const int gl = lane & (L - 1);
    const int start = __shfl_sync(0xffffffffu, o, g);
    const int end = __shfl_sync(0xffffffffu, o, g + 1);
    const int r = row0 + g;

    float acc0 = 0.0f, acc1 = 0.0f;
    int j = start + gl;

    for (; j + 3 * L < end; j += 4 * L) {
        const int c0 = ld_stream_s32(col_indices + j);
        const int c1 = ld_stream_s32(col_indices + j + L);
        const int c2 = ld_stream_s32(col_indices + j + 2 * L);
        const int c3 = ld_stream_s32(col_indices + j + 3 * L);
        const float v0 = ld_stream_f32(values + j);
        const float v1 = ld_stream_f32(values + j + L);
        const float v2 = ld_stream_f32(values + j + 2 * L);
        const float v3 = ld_stream_f32(values + j + 3 * L);
        const float x0 = __ldg(x + c0);
        const float x1 = __ldg(x + c1);
        const float x2 = __ldg(x + c2);
        const float x3 = __ldg(x + c3);
        acc0 = fmaf(v0, x0, acc0);
        acc1 = fmaf(v1, x1, acc1);
        acc0 = fmaf(v2, x2, acc0);
        acc1 = fmaf(v3, x3, acc1);
    }
    if (j < end) {
        const bool p1 = (j + L) < end;
        const bool p2 = (j + 2 * L) < end;
        const int c0 = ld_stream_s32(col_indices + j);
        const int c1 = p1 ? ld_stream_s32(col_indices + j + L) : 0;
        const int c2 = p2 ? ld_stream_s32(col_indices + j + 2 * L) : 0;
        const float v0 = ld_stream_f32(values + j);
        const float v1 = p1 ? ld_stream_f32(values + j + L) : 0.0f;
        const float v2 = p2 ? ld_stream_f32(values + j + 2 * L) : 0.0f;
        const float x0 = __ldg(x + c0);
        const float x1 = p1 ? __ldg(x + c1) : 0.0f;
        const float x2 = p2 ? __ldg(x + c2) : 0.0f;
        acc0 = fmaf(v0, x0, acc0);
        if (p1) acc1 = fmaf(v1, x1, acc1);
        if (p2) acc0 = fmaf(v2, x2, acc0);
    }

    float acc = acc0 + acc1;
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off, L);

    if (gl == 0 && r < rows) y[r] = acc;
}

template <int L>
static void launch_spmv(int rows, const float* values, const int* col_indices,
                        const int* row_offsets, const float* x, float* y) {
    const long long threads_total = (long long)rows * L;
    const long long blocks = (threads_total + SPMV_BLOCK - 1) / SPMV_BLOCK;
    spmv_csr_vector_kernel<L><<<(unsigned int)blocks, SPMV_BLOCK>>>(
        rows, values, col_indices, row_offsets, x, y);
}

// ---------------------------------------------------------------------------------------------
// Prefetch kernel (large row counts): block-contiguous row ranges + bulk L2 prefetch.
// ---------------------------------------------------------------------------------------------
template <int L>
__global__ void __launch_bounds__(SPMV_PF_BLOCK, SPMV_PF_BLOCKS_PER_SM)
spmv_csr_pf_kernel(int rows, const float* __restrict__ values,
                   const int* __restrict__ col_indices,
                   const int* __restrict__ row_offsets,
                   const float* __restrict__ x, float* __restrict__ y) {
    constexpr int RPW = 32 / L;                       // rows per warp per pass
    constexpr int WARPS = SPMV_PF_BLOCK / 32;
    constexpr int ROWS_PER_PASS = WARPS * RPW;

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;

    const int R0 = (int)(((long long)rows * blockIdx.x) / gridDim.x);
    const int R1 = (int)(((long long)rows * (blockIdx.x + 1)) / gridDim.x);
    if (R1 <= R0) return;                             // block-uniform: no rows owned

    // Warp 0: request the block's whole working set into L2 up front.
    if (warp == 0) {
        // row_offsets slice [R0, R1]: address known from rows alone, nothing to wait for.
        if (lane == 0) prefetch_range_l2(row_offsets + R0, row_offsets + R1 + 1, 0, 1);
        int se = 0;
        if (lane < 2) se = __ldg(row_offsets + (lane ? R1 : R0));
        const int s = __shfl_sync(0xffffffffu, se, 0);
        const int e = __shfl_sync(0xffffffffu, se, 1);
        if (e > s) {
            if (lane < 16)
                prefetch_range_l2(values + s, values + e, lane, 16);
            else
                prefetch_range_l2(col_indices + s, col_indices + e, lane - 16, 16);
        }
    }

    const int g = lane / L;          // row group within the warp
    const int gl = lane & (L - 1);   // lane within the group

    for (int base = R0 + warp * RPW; base < R1; base += ROWS_PER_PASS) {
        // Coalesced load of this warp's RPW+1 offsets, clamped to R1 (valid: R1 <= rows).
        int o = 0;
        if (lane <= RPW) {
            const int idx = (lane <= R1 - base) ? base + lane : R1;
            o = __ldg(row_offsets + idx);
        }
        const int start = __shfl_sync(0xffffffffu, o, g);
        const int end = __shfl_sync(0xffffffffu, o, g + 1);
        const int r = base + g;

        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        int j = start + gl;

        for (; j + 3 * L < end; j += 4 * L) {
            const int c0 = ld_stream_s32(col_indices + j);
            const int c1 = ld_stream_s32(col_indices + j + L);
            const int c2 = ld_stream_s32(col_indices + j + 2 * L);
            const int c3 = ld_stream_s32(col_indices + j + 3 * L);
            const float v0 = ld_stream_f32(values + j);
            const float v1 = ld_stream_f32(values + j + L);
            const float v2 = ld_stream_f32(values + j + 2 * L);
            const float v3 = ld_stream_f32(values + j + 3 * L);
            const float x0 = __ldg(x + c0);
            const float x1 = __ldg(x + c1);
            const float x2 = __ldg(x + c2);
            const float x3 = __ldg(x + c3);
            a0 = fmaf(v0, x0, a0);
            a1 = fmaf(v1, x1, a1);
            a2 = fmaf(v2, x2, a2);
            a3 = fmaf(v3, x3, a3);
        }
        if (j < end) {
            const bool p1 = (j + L) < end;
            const bool p2 = (j + 2 * L) < end;
            const int c0 = ld_stream_s32(col_indices + j);
            const int c1 = p1 ? ld_stream_s32(col_indices + j + L) : 0;
            const int c2 = p2 ? ld_stream_s32(col_indices + j + 2 * L) : 0;
            const float v0 = ld_stream_f32(values + j);
            const float v1 = p1 ? ld_stream_f32(values + j + L) : 0.0f;
            const float v2 = p2 ? ld_stream_f32(values + j + 2 * L) : 0.0f;
            const float x0 = __ldg(x + c0);
            const float x1 = p1 ? __ldg(x + c1) : 0.0f;
            const float x2 = p2 ? __ldg(x + c2) : 0.0f;
            a0 = fmaf(v0, x0, a0);
            if (p1) a1 = fmaf(v1, x1, a1);
            if (p2) a2 = fmaf(v2, x2, a2);
        }

        float acc = (a0 + a1) + (a2 + a3);
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, off, L);

        if (gl == 0 && r < R1) y[r] = acc;   // empty rows write 0
    }
}

static int g_num_sms = 0;

static void launch_spmv_pf(int rows, const float* values, const int* col_indices,
                           const int* row_offsets, const float* x, float* y) {
    if (g_num_sms <= 0) {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
            n > 0)
            g_num_sms = n;
        else
            g_num_sms = 132;
    }
    constexpr int L = SPMV_PF_L;
    constexpr int ROWS_PER_PASS = (SPMV_PF_BLOCK / 32) * (32 / L);
    const long long max_g = (long long)g_num_sms * SPMV_PF_BLOCKS_PER_SM;
    const long long by_rows = ((long long)rows + ROWS_PER_PASS - 1) / ROWS_PER_PASS;
    long long G = by_rows < max_g ? by_rows : max_g;
    if (G < 1) G = 1;
    spmv_csr_pf_kernel<L><<<(unsigned int)G, SPMV_PF_BLOCK>>>(
        rows, values, col_indices, row_offsets, x, y);
}

 void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        if (rows >= SPMV_PF_MIN_ROWS)
            launch_spmv_pf(rows, values, col_indices, row_offsets, x, y);
        else if (rows <= 2048)
            launch_spmv<32>(rows, values, col_indices, row_offsets, x, y);
        else if (rows <= 8192)
            launch_spmv<16>(rows, values, col_indices, row_offsets, x, y);
        else
            launch_spmv<8>(rows, values, col_indices, row_offsets, x, y);
    }
    cudaDeviceSynchronize();
}
}  // namespace cm_path2
#undef SPMV_BLOCK
#undef SPMV_PF_MIN_ROWS
#undef SPMV_PF_L
#undef SPMV_PF_BLOCKS_PER_SM
#undef SPMV_PF_BLOCK
#undef SPMV_PF_CHUNK

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices, const int* row_offsets, const float* x, float* y) {
    if (rows < 2897) {
        return cm_path2::spmv_csr(rows, values, col_indices, row_offsets, x, y);
    } else {
        return cm_path0::spmv_csr(rows, values, col_indices, row_offsets, x, y);
    }
}
