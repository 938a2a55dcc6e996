// Vector CSR SpMV (fp32), round 2.
// - A group of L lanes per row (R = 32/L rows per warp). L is chosen so that the grid is resident
//   in one wave at <= 64 registers (__launch_bounds__(128, 8)): 32768 rows x L=4 -> 1024 blocks
//   against 132 SMs x 8 blocks.
// - One predicated batch of B elements per lane (B*L >= 48 elements per row): all column loads,
//   then all value loads, then all x gathers, then the FMAs. So a typical row costs one dependent
//   round trip. Longer rows (heavy-tailed, hub or dense rows) loop over further batches.
// - Shuffle-xor reduction inside the group. The row sums are then moved into lanes 0..R-1, and
//   each warp writes its R outputs with one coalesced store.
#include <cuda_runtime.h>

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

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
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
