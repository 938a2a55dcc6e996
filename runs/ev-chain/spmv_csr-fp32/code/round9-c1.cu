// SpMV CSR fp32, round 9.
// Starts from round 8 (x staged in shared memory, 4 lanes x 12 elements per row, one barrier,
// y-line prefetch, clipped bulk L2 prefetch of values/col_indices, 256 B-fill nc loads).
// Changes:
//  1) L2 evict_first policy (createpolicy.fractional.L2::evict_first, fraction 1.0) on the
//     values/col_indices demand loads (ld.global.nc.L2::cache_hint.L2::256B, L1 allocation kept).
//     These lines are read once, so a later fill into the same L2 set should replace them
//     (clean, no write-back) rather than one of the memset's dirty lines.
//       -DEF_DEMAND=0  : no policy on the demand loads (round-8 behaviour)
//       -DEF_PF=1      : also put the policy on the bulk prefetch (variant b)
//     row_offsets, x and y stay at normal priority.
//  2) Smaller code on the executed path:
//     - one copy of the gather+FMA code (the first window is loaded before the barrier, later
//       windows are reloaded at the bottom of the same rolled loop);
//     - inactive slots get column -1, so a single unsigned compare (col < K) guards both
//       "slot past row end" and "column not staged" and the LDS/FFMA pair is predicated on it;
//     - columns >= K (x not fully staged: cols > 2048 or a short 2 MiB window) are handled
//       out of line: a running max of the columns flags them, and one rolled pass after the
//       main loop adds exactly those terms from global memory;
//     - the two bulk-prefetch branches share one copy of the code.
//       -DPAD_TEST=1   : instruction-fetch sensitivity test: warp 0 of each block runs
//                        128 extra non-removable FADDs (2 KiB of SASS) right after the barrier.
//  3) -DPF_G=0 still removes the bulk L2 prefetch entirely (A/B against PF_G=22).
//     The prefetch stays clipped to the 2 MiB-aligned window holding values[0]/col_indices[0].
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef PF_G
#define PF_G 22               // guessed mean row length for the L2 prefetch (0 = off)
#endif
#ifndef EF_DEMAND
#define EF_DEMAND 1           // evict_first policy on the values/col_indices demand loads
#endif
#ifndef EF_PF
#define EF_PF 0               // evict_first policy on the bulk L2 prefetch as well
#endif
#ifndef PAD_TEST
#define PAD_TEST 0            // 1 = 2 KiB executed padding after the barrier (measurement only)
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

__device__ __forceinline__ unsigned long long make_evict_first_policy() {
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}

// Bulk L2 prefetch: address 16 B aligned, size a nonzero multiple of 16.
__device__ __forceinline__ void prefetch_bulk_l2(unsigned long long addr, unsigned bytes,
                                                 unsigned long long pol) {
#if EF_PF
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n"
                 :: "l"(addr), "r"(bytes), "l"(pol) : "memory");
#else
    (void)pol;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(addr), "r"(bytes) : "memory");
#endif
}

// Predicated read-only loads with 256 B L2 fill (and the evict_first policy when EF_DEMAND).
// Value: left undefined when the predicate is off (never used then: its column is -1).
__device__ __forceinline__ float ld_val(const float* p, int pr, unsigned long long pol) {
    float r;
#if EF_DEMAND
    asm volatile("{\n\t.reg .pred q;\n\t"
                 "setp.ne.s32 q, %2, 0;\n\t"
                 "@q ld.global.nc.L2::cache_hint.L2::256B.f32 %0, [%1], %3;\n\t}\n"
                 : "=f"(r) : "l"(p), "r"(pr), "l"(pol));
#else
    (void)pol;
    asm volatile("{\n\t.reg .pred q;\n\t"
                 "setp.ne.s32 q, %2, 0;\n\t"
                 "@q ld.global.nc.L2::256B.f32 %0, [%1];\n\t}\n"
                 : "=f"(r) : "l"(p), "r"(pr));
#endif
    return r;
}
// Column: -1 when the predicate is off.
__device__ __forceinline__ int ld_col(const int* p, int pr, unsigned long long pol) {
    int r = -1;
#if EF_DEMAND
    asm volatile("{\n\t.reg .pred q;\n\t"
                 "setp.ne.s32 q, %2, 0;\n\t"
                 "@q ld.global.nc.L2::cache_hint.L2::256B.s32 %0, [%1], %3;\n\t}\n"
                 : "+r"(r) : "l"(p), "r"(pr), "l"(pol));
#else
    (void)pol;
    asm volatile("{\n\t.reg .pred q;\n\t"
                 "setp.ne.s32 q, %2, 0;\n\t"
                 "@q ld.global.nc.L2::256B.s32 %0, [%1];\n\t}\n"
                 : "+r"(r) : "l"(p), "r"(pr));
#endif
    return r;
}

// One window: slot k of this lane is element (sub + k*LPR) past the window start; it is
// active iff k*LPR < rem, where rem = elements of the row left from this lane's first slot.
__device__ __forceinline__ void load_window(const float* vp, const int* cp, int rem,
                                            float (&v)[EPL], int (&c)[EPL],
                                            unsigned long long pol) {
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
        const int pr = (k * LPR < rem) ? 1 : 0;
        v[k] = ld_val(vp + k * LPR, pr, pol);
        c[k] = ld_col(cp + k * LPR, pr, pol);
    }
}

#if PAD_TEST
#define PAD_L "add.rn.f32 %0, %0, %8;\n\tadd.rn.f32 %1, %1, %8;\n\t" \
              "add.rn.f32 %2, %2, %8;\n\tadd.rn.f32 %3, %3, %8;\n\t" \
              "add.rn.f32 %4, %4, %8;\n\tadd.rn.f32 %5, %5, %8;\n\t" \
              "add.rn.f32 %6, %6, %8;\n\tadd.rn.f32 %7, %7, %8;\n\t"
#define PAD_4 PAD_L PAD_L PAD_L PAD_L
#define PAD_16 PAD_4 PAD_4 PAD_4 PAD_4        // 128 FADD = 2 KiB of SASS
#endif

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

#if EF_DEMAND || EF_PF
    const unsigned long long pol = make_evict_first_policy();
#else
    const unsigned long long pol = 0ull;
#endif

    // 3) One bulk L2 prefetch per array per block (lane 0 of warps 1 and 2), and the y line.
#if PF_G > 0
    if (tid == 32 || tid == 64) {
        const bool isv = (tid == 32);
        const unsigned long long base  = isv ? vbase : cbase;
        const unsigned long long tot   = isv ? vtot : ctot;
        const unsigned long long slice = isv ? vslice : cslice;
        const unsigned long long off = (unsigned long long)blockIdx.x * slice;
        if (off < tot) {                      // tot == 0 (no prefetch) never passes
            const unsigned long long r = tot - off;
            prefetch_bulk_l2(base + off, (unsigned)(r < slice ? r : slice), pol);
        }
    } else
#endif
    if (tid == 0) {
        prefetch_l2(y + row0);                // row0 < rows always
    }

    // 4) Issue the whole first window of values/cols into registers.
    const int len = end - start;
    int rem = len - sub;                      // this lane's slots: sub, sub+4, ... < len
    const float* vp = values + start + sub;
    const int* cp = col_indices + start + sub;

    float v[EPL];
    int c[EPL];
    load_window(vp, cp, rem, v, c, pol);

    // 5) Unconditional barrier: x is in shared memory after it.
    cp_async_wait_all();
    __syncthreads();

    float acc = 0.0f;

#if PAD_TEST
    if (tid < 32) {
        const float z = __int_as_float(K & (int)0x80000000);   // +-0, unknown to the compiler
        float p0 = z, p1 = z, p2 = z, p3 = z, p4 = z, p5 = z, p6 = z, p7 = z;
        asm volatile(PAD_16
                     : "+f"(p0), "+f"(p1), "+f"(p2), "+f"(p3),
                       "+f"(p4), "+f"(p5), "+f"(p6), "+f"(p7)
                     : "f"(z));
        acc = ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7));   // = +-0
    }
#endif

    // 6) Gather + FMA, one copy for all windows. Inactive slots carry column -1, so the single
    //    unsigned compare skips them as well as columns that are not staged (>= K).
    int cmax = -1;
#pragma unroll 1
    for (;;) {
#pragma unroll
        for (int k = 0; k < EPL; ++k) {
            const int cc = c[k];
            if ((unsigned)cc < (unsigned)K) acc = fmaf(v[k], xs[cc], acc);
            cmax = max(cmax, cc);
        }
        rem -= WIN;
        if (rem <= 0) break;                  // long rows (heavy-tailed / hub / dense) go on
        vp += WIN;
        cp += WIN;
        load_window(vp, cp, rem, v, c, pol);
    }

    // 7) Out of line: columns >= K (not staged). This lane covered exactly the elements
    //    e = sub (mod LPR) of its row; add the unstaged ones among them from global memory.
    if (cmax >= K) {
        const float* rv = values + start;
        const int* rc = col_indices + start;
        for (int e = sub; e < len; e += LPR) {
            const int cc = __ldg(rc + e);
            if (cc >= K) acc = fmaf(__ldg(rv + e), __ldg(x + cc), acc);
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
