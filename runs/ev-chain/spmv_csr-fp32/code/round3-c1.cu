// spmv_csr (fp32), y = A x with A in CSR.
// Warp-contiguous, register-only kernel with a fixed dependent-load depth of 3:
//   step 1: lanes 0..R load row_offsets[r0 .. r0+R] (one coalesced request)
//   step 2: the warp's contiguous nnz segment [off[r0], off[r0+R]) is covered with
//           16B-aligned float4 / int4 chunks (C per lane), all issued before any use
//   step 3: all 4*C x[col] gathers per lane are issued at once
// Reduction: per-lane run-length accumulation (rows are monotone along a lane's
// elements), one shared-memory atomic add per run into R per-warp accumulators,
// then lane i writes y[r0+i]. Segments longer than one window loop over windows with
// the same code; per-lane running sums persist across windows, so long (hub / dense /
// heavy-tailed) rows are summed as 32 strided partial sums, more accurately than a
// serial sum.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kWarpsPerBlock = 2;
constexpr int kThreads = kWarpsPerBlock * 32;

__device__ __forceinline__ float4 ld_stream_f4(const float* p) {
    float4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ int4 ld_stream_i4(const int* p) {
    int4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

template <int R, int C, bool VEC>
__global__ void __launch_bounds__(kThreads, 16)
spmv_warp_kernel(int rows, const float* __restrict__ values, const int* __restrict__ col_indices,
                 const int* __restrict__ row_offsets, const float* __restrict__ x,
                 float* __restrict__ y) {
    __shared__ float s_acc[kWarpsPerBlock][R];

    const unsigned FULL = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int wib = threadIdx.x >> 5;
    const int warp = blockIdx.x * kWarpsPerBlock + wib;
    const int r0 = warp * R;
    if (r0 >= rows) return;  // warp-uniform
    const int nrows = min(R, rows - r0);

    // ---- step 1: row offsets (lanes 0..nrows), all indices <= rows are valid ----
    int my_off = 0;
    if (lane <= nrows) my_off = __ldg(row_offsets + r0 + lane);

    // Side work while step 1 is in flight: zero accumulators, warm y / x pages+lines.
    if (lane < R) s_acc[wib][lane] = 0.0f;
    if (lane == 0) {
        prefetch_l2(y + r0);
        if (x != nullptr) {
            // Only lines inside the 4 KiB page that holds x[0] (always mapped).
            const uintptr_t xa = reinterpret_cast<uintptr_t>(x);
            const uintptr_t page_end = (xa | (uintptr_t)4095) + 1;
            const uintptr_t a = (xa & ~(uintptr_t)127) + ((uintptr_t)(warp & 31) << 7);
            if (a < page_end) prefetch_l2(reinterpret_cast<const void*>(a));
        }
    }

    const int seg_begin = __shfl_sync(FULL, my_off, 0);
    const int seg_end = __shfl_sync(FULL, my_off, nrows);

    // bnd[i-1] = start offset of local row i (i = 1..R-1); rows past nrows get seg_end
    // so they never match an in-segment element.
    int bnd[R > 1 ? R - 1 : 1];
#pragma unroll
    for (int i = 1; i < R; ++i) {
        const int o = __shfl_sync(FULL, my_off, i);
        bnd[i - 1] = (i < nrows) ? o : seg_end;
    }
    __syncwarp();  // accumulator zeroing visible to the whole warp

    int cur_row = -1;
    float cur = 0.0f;

    if (seg_end > seg_begin) {
        const int base = seg_begin & ~3;
        for (int wb = base; wb < seg_end; wb += 128 * C) {
            float v[C][4];
            int ci[C][4];

            // ---- step 2: values / col_indices, all issued before use ----
#pragma unroll
            for (int c = 0; c < C; ++c) {
                const int e0 = wb + (c * 32 + lane) * 4;
                if (VEC) {
                    float4 vv = make_float4(0.f, 0.f, 0.f, 0.f);
                    int4 cc = make_int4(0, 0, 0, 0);
                    // A 16B-aligned chunk containing at least one segment element is
                    // entirely inside a mapped page: safe to load whole.
                    if (e0 < seg_end) {
                        vv = ld_stream_f4(values + e0);
                        cc = ld_stream_i4(col_indices + e0);
                    }
                    v[c][0] = vv.x; v[c][1] = vv.y; v[c][2] = vv.z; v[c][3] = vv.w;
                    ci[c][0] = cc.x; ci[c][1] = cc.y; ci[c][2] = cc.z; ci[c][3] = cc.w;
                } else {
#pragma unroll
                    for (int k = 0; k < 4; ++k) {
                        const int j = e0 + k;
                        v[c][k] = 0.0f;
                        ci[c][k] = 0;
                        if (j >= seg_begin && j < seg_end) {
                            v[c][k] = __ldg(values + j);
                            ci[c][k] = __ldg(col_indices + j);
                        }
                    }
                }
            }

            // ---- step 3: all x gathers at once ----
            float xv[C][4];
#pragma unroll
            for (int c = 0; c < C; ++c) {
                const int e0 = wb + (c * 32 + lane) * 4;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int j = e0 + k;
                    xv[c][k] = 0.0f;
                    if (j >= seg_begin && j < seg_end) xv[c][k] = __ldg(x + ci[c][k]);
                }
            }

            // ---- accumulate: run-length per row, one shared atomic per run ----
#pragma unroll
            for (int c = 0; c < C; ++c) {
                const int e0 = wb + (c * 32 + lane) * 4;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int j = e0 + k;
                    if (j >= seg_begin && j < seg_end) {
                        int r = 0;
#pragma unroll
                        for (int i = 0; i < R - 1; ++i) r += (bnd[i] <= j) ? 1 : 0;
                        if (r != cur_row) {
                            if (cur_row >= 0) atomicAdd(&s_acc[wib][cur_row], cur);
                            cur_row = r;
                            cur = 0.0f;
                        }
                        cur = fmaf(v[c][k], xv[c][k], cur);
                    }
                }
            }
        }
    }
    if (cur_row >= 0) atomicAdd(&s_acc[wib][cur_row], cur);
    __syncwarp();
    if (lane < nrows) y[r0 + lane] = s_acc[wib][lane];
}

template <int R, int C>
inline void launch_spmv(int rows, const float* values, const int* col_indices,
                        const int* row_offsets, const float* x, float* y, bool vec) {
    const long long nwarps = ((long long)rows + R - 1) / R;
    const unsigned blocks = (unsigned)((nwarps + kWarpsPerBlock - 1) / kWarpsPerBlock);
    if (vec) {
        spmv_warp_kernel<R, C, true><<<blocks, kThreads>>>(rows, values, col_indices,
                                                           row_offsets, x, y);
    } else {
        spmv_warp_kernel<R, C, false><<<blocks, kThreads>>>(rows, values, col_indices,
                                                            row_offsets, x, y);
    }
}

}  // namespace

extern "C" void spmv_csr(int rows, const float* values, const int* col_indices,
                         const int* row_offsets, const float* x, float* y) {
    if (rows > 0) {
        const bool vec =
            ((reinterpret_cast<uintptr_t>(values) | reinterpret_cast<uintptr_t>(col_indices)) &
             (uintptr_t)15) == 0;
        if (rows <= 4096) {
            launch_spmv<4, 1>(rows, values, col_indices, row_offsets, x, y, vec);
        } else {
            launch_spmv<8, 2>(rows, values, col_indices, row_offsets, x, y, vec);
        }
    }
    cudaDeviceSynchronize();
}
