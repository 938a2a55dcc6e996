// merge_attn_states (fp32): persistent CTAs with a multi-stage cp.async.bulk (1-D TMA) pipeline.
//
// V_a / V_b / V_out are treated as one flat array of N = T*H*S floats, cut into chunks of CH floats.
// Each CTA (1 producer warp + NCW consumer warps) walks the chunks b, b+G, b+2G, ...
//  * The producer warp: lane 0 issues two bulk copies (V_a chunk, V_b chunk) into an NST-stage smem
//    ring, with a "full" mbarrier per stage. All 32 lanes then load the head-major LSEs of the
//    rows the chunk touches, form the per-row weights (one-exp form), write them into a small
//    per-stage table, write LSE_out for rows whose s==0 element lies in this chunk, and arrive on "full".
//    (full count = 33: lane 0's arrive.expect_tx + 32 arrivals after the table writes.)
//  * Consumer warps wait on "full", read float4s from smem, look up the row weights in the table,
//    write V_out with 16-B streaming stores, then arrive on "empty" (count = all consumer threads).
//  * The leftover part (N % CH floats) is done directly by the last CTA's consumer warps.
// Small N, S not a multiple of 4, S < 32, or V pointers that are not 16-B aligned use a simple
// general kernel (one warp per row).
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#define CH 2048                       // floats per operand per chunk (8 KB)
#define NST 4                         // pipeline stages
#define NCW 8                         // consumer warps
#define NCT (NCW * 32)                // consumer threads
#define NTHREADS (NCT + 32)           // + 1 producer warp
#define MIN_S_TMA 32
#define MAXROWS (CH / MIN_S_TMA + 2)  // rows a chunk can touch when S >= MIN_S_TMA
#define ROWS_PER_LANE ((MAXROWS + 31) / 32)
#define F4_PER_THREAD (CH / 4 / NCT)
#define TMA_MIN_N (1LL << 20)

static_assert((CH / 4) % NCT == 0, "chunk must split evenly over consumer threads");
static_assert(ROWS_PER_LANE <= 4, "row table too large");

struct __align__(16) SmemT {
    float a[NST][CH];
    float b[NST][CH];
    float2 tab[NST][MAXROWS];
    unsigned long long full[NST];
    unsigned long long empty[NST];
};

// ------------------------------------------------------------------------------------------------
// helpers
// ------------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile(
        "{\n\t.reg .b64 st;\n\t"
        "mbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(bar)
        : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile(
        "{\n\t.reg .b64 st;\n\t"
        "mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}" ::"r"(bar),
        "r"(bytes)
        : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}

__device__ __forceinline__ float map_inf(float x) {
    return ((__float_as_uint(x) & 0x7fffffffu) == 0x7f800000u) ? -FLT_MAX : x;
}

// One-exp form: m = max, e = exp(-|pa-pb|), big weight = 1/(1+e), small = e/(1+e),
// LSE = m + log1p(e). +-inf is read as -FLT_MAX (both infinite -> plain average, LSE = -FLT_MAX).
__device__ __forceinline__ void merge_weights(float pa, float pb, float& wa, float& wb,
                                              float& lse) {
    pa = map_inf(pa);
    pb = map_inf(pb);
    const float m = fmaxf(pa, pb);
    const float e = expf(-fabsf(pa - pb));
    const float inv = 1.0f / (1.0f + e);
    const float small = e * inv;
    const bool a_big = (pa >= pb);
    wa = a_big ? inv : small;
    wb = a_big ? small : inv;
    lse = m + log1pf(e);
}

// ------------------------------------------------------------------------------------------------
// Persistent TMA-pipelined kernel
// ------------------------------------------------------------------------------------------------
__device__ __forceinline__ void producer_issue(SmemT& sm, const float* __restrict__ V_a,
                                               const float* __restrict__ V_b, long long c,
                                               int st) {
    const size_t c0 = (size_t)c * CH;
    const uint32_t bar = smem_u32(&sm.full[st]);
    mbar_arrive_expect_tx(bar, 2u * CH * (uint32_t)sizeof(float));
    bulk_g2s(smem_u32(&sm.a[st][0]), V_a + c0, CH * (uint32_t)sizeof(float), bar);
    bulk_g2s(smem_u32(&sm.b[st][0]), V_b + c0, CH * (uint32_t)sizeof(float), bar);
}

__device__ __forceinline__ void producer_table(SmemT& sm, float* __restrict__ LSE_out,
                                               const float* __restrict__ lse_a,
                                               const float* __restrict__ lse_b, int T, int H,
                                               int S, long long c, int st, int lane) {
    const long long c0 = c * (long long)CH;
    const long long r0 = c0 / S;
    const long long r1 = (c0 + CH - 1) / S;
    const int nrows = (int)(r1 - r0 + 1);

    float pa[ROWS_PER_LANE], pb[ROWS_PER_LANE];
    size_t li[ROWS_PER_LANE];
    long long rr[ROWS_PER_LANE];
#pragma unroll
    for (int k = 0; k < ROWS_PER_LANE; ++k) {
        const int i = lane + 32 * k;
        pa[k] = 0.f;
        pb[k] = 0.f;
        li[k] = 0;
        rr[k] = 0;
        if (i < nrows) {
            const long long r = r0 + i;
            const long long t = r / H;
            const long long h = r - t * H;
            const size_t idx = (size_t)h * (size_t)T + (size_t)t;
            li[k] = idx;
            rr[k] = r;
            pa[k] = __ldg(lse_a + idx);
            pb[k] = __ldg(lse_b + idx);
        }
    }
#pragma unroll
    for (int k = 0; k < ROWS_PER_LANE; ++k) {
        const int i = lane + 32 * k;
        if (i < nrows) {
            float wa, wb, lse;
            merge_weights(pa[k], pb[k], wa, wb, lse);
            sm.tab[st][i] = make_float2(wa, wb);
            if (LSE_out != nullptr && rr[k] * (long long)S >= c0) LSE_out[li[k]] = lse;
        }
    }
    mbar_arrive(smem_u32(&sm.full[st]));
}

__global__ void __launch_bounds__(NTHREADS, 2)
merge_tma_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                 const float* __restrict__ V_a, const float* __restrict__ lse_a,
                 const float* __restrict__ V_b, const float* __restrict__ lse_b, int T, int H,
                 int S, long long nchunks, long long N) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    SmemT& sm = *reinterpret_cast<SmemT*>(smem_raw);

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const long long G = gridDim.x;
    const long long b = blockIdx.x;
    const int nmy = (b < nchunks) ? (int)((nchunks - 1 - b) / G + 1) : 0;

    if (tid == 0) {
#pragma unroll
        for (int i = 0; i < NST; ++i) {
            mbar_init(smem_u32(&sm.full[i]), 33u);
            mbar_init(smem_u32(&sm.empty[i]), (uint32_t)NCT);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();

    if (warp == NCW) {
        // ------------------------------ producer warp ------------------------------
        const int P = nmy < NST ? nmy : NST;
        if (lane == 0) {
            for (int j = 0; j < P; ++j) producer_issue(sm, V_a, V_b, b + (long long)j * G, j);
        }
        for (int j = 0; j < P; ++j)
            producer_table(sm, LSE_out, lse_a, lse_b, T, H, S, b + (long long)j * G, j, lane);
        for (int j = P; j < nmy; ++j) {
            const int st = j % NST;
            mbar_wait(smem_u32(&sm.empty[st]), (uint32_t)(((j / NST) & 1) ^ 1));
            const long long c = b + (long long)j * G;
            if (lane == 0) producer_issue(sm, V_a, V_b, c, st);
            producer_table(sm, LSE_out, lse_a, lse_b, T, H, S, c, st, lane);
        }
    } else {
        // ------------------------------ consumer warps ------------------------------
        const uint32_t Su = (uint32_t)S;
        for (int j = 0; j < nmy; ++j) {
            const int st = j % NST;
            const long long c0 = (b + (long long)j * G) * (long long)CH;
            const long long r0 = c0 / S;
            const uint32_t off0 = (uint32_t)(c0 - r0 * S);
            mbar_wait(smem_u32(&sm.full[st]), (uint32_t)((j / NST) & 1));
            const float4* A4 = reinterpret_cast<const float4*>(&sm.a[st][0]);
            const float4* B4 = reinterpret_cast<const float4*>(&sm.b[st][0]);
            const float2* tb = &sm.tab[st][0];
            float4* O4 = reinterpret_cast<float4*>(V_out + c0);
#pragma unroll
            for (int k = 0; k < F4_PER_THREAD; ++k) {
                const int q = tid + k * NCT;
                const float4 x = A4[q];
                const float4 y = B4[q];
                const uint32_t rel = (off0 + 4u * (uint32_t)q) / Su;
                const float2 w = tb[rel];
                float4 o;
                o.x = fmaf(x.x, w.x, y.x * w.y);
                o.y = fmaf(x.y, w.x, y.y * w.y);
                o.z = fmaf(x.z, w.x, y.z * w.y);
                o.w = fmaf(x.w, w.x, y.w * w.y);
                __stcs(O4 + q, o);
            }
            mbar_arrive(smem_u32(&sm.empty[st]));
        }

        // Leftover part after the last full chunk (fewer than CH floats; N % 4 == 0 since S % 4 == 0).
        if (b == G - 1) {
            const long long tail0 = nchunks * (long long)CH;
            for (long long f = tail0 + 4LL * tid; f < N; f += 4LL * NCT) {
                const long long r = f / S;
                const long long s = f - r * S;
                const long long t = r / H;
                const long long h = r - t * H;
                const size_t idx = (size_t)h * (size_t)T + (size_t)t;
                float wa, wb, lse;
                merge_weights(__ldg(lse_a + idx), __ldg(lse_b + idx), wa, wb, lse);
                const float4 x = __ldcs(reinterpret_cast<const float4*>(V_a + f));
                const float4 y = __ldcs(reinterpret_cast<const float4*>(V_b + f));
                float4 o;
                o.x = fmaf(x.x, wa, y.x * wb);
                o.y = fmaf(x.y, wa, y.y * wb);
                o.z = fmaf(x.z, wa, y.z * wb);
                o.w = fmaf(x.w, wa, y.w * wb);
                __stcs(reinterpret_cast<float4*>(V_out + f), o);
                if (LSE_out != nullptr && s == 0) LSE_out[idx] = lse;
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// General fallback: one warp per (t, h) row, any S, any alignment.
// ------------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256)
merge_generic_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                     const float* __restrict__ V_a, const float* __restrict__ lse_a,
                     const float* __restrict__ V_b, const float* __restrict__ lse_b, int T,
                     int H, int S) {
    const int lane = threadIdx.x & 31;
    const long long wpb = blockDim.x >> 5;
    const long long gw = (long long)blockIdx.x * wpb + (threadIdx.x >> 5);
    const long long nw = (long long)gridDim.x * wpb;
    const long long R = (long long)T * H;
    for (long long r = gw; r < R; r += nw) {
        const long long t = r / H;
        const long long h = r - t * H;
        const size_t idx = (size_t)h * (size_t)T + (size_t)t;
        float wa, wb, lse;
        merge_weights(__ldg(lse_a + idx), __ldg(lse_b + idx), wa, wb, lse);
        const size_t base = (size_t)r * (size_t)S;
        const float* a = V_a + base;
        const float* bb = V_b + base;
        float* o = V_out + base;
        for (int s = lane; s < S; s += 32) o[s] = fmaf(__ldcs(a + s), wa, __ldcs(bb + s) * wb);
        if (lane == 0 && LSE_out != nullptr) LSE_out[idx] = lse;
    }
}

// ------------------------------------------------------------------------------------------------
// Host entry
// ------------------------------------------------------------------------------------------------
static int g_nsm = 0;
static int g_occ = 0;

static void init_once() {
    if (g_nsm > 0) return;
    int dev = 0;
    cudaGetDevice(&dev);
    int nsm = 0;
    if (cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        nsm <= 0)
        nsm = 132;
    cudaFuncSetAttribute(merge_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)sizeof(SmemT));
    cudaFuncSetAttribute(merge_tma_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    int occ = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, merge_tma_kernel, NTHREADS,
                                                      sizeof(SmemT)) != cudaSuccess)
        occ = 1;
    if (occ < 1) occ = 1;
    if (occ > 2) occ = 2;
    cudaGetLastError();  // clear any non-sticky error from the queries
    g_occ = occ;
    g_nsm = nsm;
}

extern "C" void merge_attn_states(float* V_out, float* LSE_out, const float* V_a,
                                  const float* lse_a, const float* V_b, const float* lse_b,
                                  int num_tokens, int num_heads, int head_size) {
    if (num_tokens > 0 && num_heads > 0 && head_size > 0) {
        init_once();
        const int T = num_tokens, H = num_heads, S = head_size;
        const long long N = (long long)T * H * S;
        const bool aligned =
            ((((uintptr_t)V_out) | ((uintptr_t)V_a) | ((uintptr_t)V_b)) & 15u) == 0;
        if (N >= TMA_MIN_N && (S % 4) == 0 && S >= MIN_S_TMA && aligned) {
            const long long nchunks = N / CH;
            long long G = (long long)g_nsm * g_occ;
            if (G > nchunks) G = nchunks;
            if (G < 1) G = 1;
            merge_tma_kernel<<<(unsigned)G, NTHREADS, sizeof(SmemT)>>>(
                V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, nchunks, N);
        } else {
            const long long R = (long long)T * H;
            long long blocks = (R + 7) / 8;
            const long long cap = (long long)g_nsm * 16;
            if (blocks > cap) blocks = cap;
            if (blocks < 1) blocks = 1;
            merge_generic_kernel<<<(unsigned)blocks, 256>>>(V_out, LSE_out, V_a, lse_a, V_b,
                                                            lse_b, T, H, S);
        }
    }
    cudaDeviceSynchronize();
}
