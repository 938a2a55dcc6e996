// SpMV CSR fp32, round 8.
// Round 7 (x staged in shared memory, 4 lanes x 12 elements per row, one barrier, y prefetch)
// plus:
//  1) One bulk L2 prefetch (cp.async.bulk.prefetch.L2) per array per block at kernel entry,
//     issued right after the row_offsets loads and the x cp.async. The prefetched union is
//     sized from a guessed mean row length PF_G (rows*PF_G elements), clipped to the 2 MiB-aligned
//     window holding values[0] / col_indices[0], and split into abutting 16 B-aligned slices,
//     one per block. Correctness does not depend on the guess (it is only a hint).
//     Build with -DPF_G=0 to disable the prefetch (A/B variant).
//  2) values/col_indices demand loads use ld.global.nc.L2::256B (L1 allocation kept),
//     predicated inside the asm so the unrolled window stays branch-free.
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef PF_G
#define PF_G 22               // guessed mean row length for the L2 prefetch (0 = off)
#endif

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
// Bulk L2 prefetch: address 16 B aligned, size a nonzero multiple of 16.
__device__ __forceinline__ void prefetch_bulk_l2(unsigned long long addr, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(addr), "r"(bytes) : "memory");
}
// Predicated read-only loads with 256 B L2 fill; 0 when the predicate is off.
__device__ __forceinline__ float ld_val(const float* p, int pr) {
    float r;
    asm volatile("{\n\t.reg .pred q;\n\t"
                 "setp.ne.s32 q, %2, 0;\n\t"
                 "mov.f32 %0, 0f00000000;\n\t"
                 "@q ld.global.nc.L2::256B.f32 %0, [%1];\n\t}\n"
                 : "=f"(r) : "l"(p), "r"(pr));
    return r;
}
__device__ __forceinline__ int ld_col(const int* p, int pr) {
    int r;
    asm volatile("{\n\t.reg .pred q;\n\t"
                 "setp.ne.s32 q, %2, 0;\n\t"
                 "mov.u32 %0, 0;\n\t"
                 "@q ld.global.nc.L2::256B.s32 %0, [%1];\n\t}\n"
                 : "=r"(r) : "l"(p), "r"(pr));
    return r;
}

__global__ void __launch_bounds__(512, 2)
spmv_csr_kernel(int rows, const float* __restrict__ values, const int* __restrict__ col_indices,
                const int* __restrict__ row_offsets, const float* __restrict__ x,
                float* __restrict__ y, int K, int vec16,
                unsigned long long vbase, unsigned long long vtot, unsigned long long vslice,
                unsigned long long cbase, unsigned long long ctot, unsigned long long cslice) {
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

    // 3) One bulk L2 prefetch per array per block (threads outside warp 0), and the y line.
    if (tid == 32) {
        if (vtot != 0ull) {
            const unsigned long long off = (unsigned long long)blockIdx.x * vslice;
            if (off < vtot) {
                const unsigned long long rem = vtot - off;
                const unsigned sz = (unsigned)(rem < vslice ? rem : vslice);
                prefetch_bulk_l2(vbase + off, sz);
            }
        }
    } else if (tid == 64) {
        if (ctot != 0ull) {
            const unsigned long long off = (unsigned long long)blockIdx.x * cslice;
            if (off < ctot) {
                const unsigned long long rem = ctot - off;
                const unsigned sz = (unsigned)(rem < cslice ? rem : cslice);
                prefetch_bulk_l2(cbase + off, sz);
            }
        }
    } else if (tid == 0) {
        prefetch_l2(y + row0);   // row0 < rows always
    }

    // 4) Issue the whole first window of values/cols into registers.
    const int len = end - start;
    const float* vp = values + start;
    const int* cp = col_indices + start;

    float v[EPL];
    int c[EPL];
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
        const int e = sub + k * LPR;
        const int pr = (e < len) ? 1 : 0;
        v[k] = ld_val(vp + e, pr);
        c[k] = ld_col(cp + e, pr);
    }

    // 5) Unconditional barrier: x is in shared memory after it.
    cp_async_wait_all();
    __syncthreads();

    // 6) Gather + FMA for the first window (inactive slots hold v = 0, c = 0).
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
            const int pr = (e < len) ? 1 : 0;
            v[k] = ld_val(vp + e, pr);
            c[k] = ld_col(cp + e, pr);
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

// Plans the bulk prefetch of one array: a 16 B-aligned base inside the 2 MiB-aligned window
// holding p[0], a total of min(want, bytes left in that window) (multiple of 16), and the
// per-block slice (multiple of 16). tot == 0 means no prefetch.
static void plan_prefetch(const void* p, unsigned long long want, int blocks,
                          unsigned long long* base, unsigned long long* tot,
                          unsigned long long* slice) {
    *base = 0ull; *tot = 0ull; *slice = 0ull;
    if (p == nullptr || want == 0ull || blocks <= 0) return;
    const unsigned long long a = (unsigned long long)(uintptr_t)p;
    const unsigned long long a0 = (a + 15ull) & ~15ull;
    const unsigned long long we = (a | 0x1FFFFFull) + 1ull;
    if (a0 >= we) return;
    const unsigned long long avail = we - a0;              // multiple of 16
    want = (want + 15ull) & ~15ull;
    const unsigned long long t = (want < avail) ? want : avail;
    if (t == 0ull) return;
    unsigned long long s = (t + (unsigned long long)blocks - 1ull) / (unsigned long long)blocks;
    s = (s + 15ull) & ~15ull;
    if (s == 0ull) s = 16ull;
    *base = a0; *tot = t; *slice = s;
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

        // Bulk L2 prefetch plan for values / col_indices (guessed rows*PF_G elements).
        const unsigned long long want = (unsigned long long)rows * (unsigned long long)PF_G * 4ull;
        unsigned long long vbase, vtot, vslice, cbase, ctot, cslice;
        plan_prefetch(values, want, blocks, &vbase, &vtot, &vslice);
        plan_prefetch(col_indices, want, blocks, &cbase, &ctot, &cslice);

        spmv_csr_kernel<<<blocks, threads>>>(rows, values, col_indices, row_offsets, x, y, K,
                                             vec16, vbase, vtot, vslice, cbase, ctot, cslice);
    }
    cudaDeviceSynchronize();
}
