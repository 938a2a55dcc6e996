// merge_attn_states (fp32), Plan 3: token-tile blocks.
// Each block owns a contiguous span of V (TT whole tokens x all H heads, or, for very large
// H / H*S, a contiguous range of (t,h) rows). The block's first batch of V loads is issued
// first. Phase A then stages the head-major LSEs (coalesced along t), computes the two
// weights per row with the one-exp form into shared memory, and writes LSE_out. One
// __syncthreads follows. Phase B streams the span with float4 loads and stores (or scalar
// ones when S % 4 != 0 or a pointer is misaligned), U independent loads per operand per thread.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#define NT 256
#define SMEM_MAX_BYTES (48 * 1024)
#define TARGET_FLOATS 8192LL
#define NUM_SMS 132

__device__ __forceinline__ float4 ld_stream(const float4* p) { return __ldcs(p); }
__device__ __forceinline__ float ld_stream(const float* p) { return __ldcs(p); }
__device__ __forceinline__ void st_stream(float4* p, const float4& v) { __stcs(p, v); }
__device__ __forceinline__ void st_stream(float* p, float v) { __stcs(p, v); }

__device__ __forceinline__ float4 mix(const float4& a, const float4& b, float wa, float wb) {
    float4 o;
    o.x = fmaf(a.x, wa, b.x * wb);
    o.y = fmaf(a.y, wa, b.y * wb);
    o.z = fmaf(a.z, wa, b.z * wb);
    o.w = fmaf(a.w, wa, b.w * wb);
    return o;
}
__device__ __forceinline__ float mix(float a, float b, float wa, float wb) {
    return fmaf(a, wa, b * wb);
}

// Bit test so that fast-math variants cannot fold it away.
__device__ __forceinline__ float map_inf(float x) {
    return ((__float_as_uint(x) & 0x7fffffffu) == 0x7f800000u) ? -FLT_MAX : x;
}

__device__ __forceinline__ void lse_weights(float pa, float pb, float& wa, float& wb,
                                            float& lse) {
    pa = map_inf(pa);
    pb = map_inf(pb);
    const float m = fmaxf(pa, pb);
    const float d = fabsf(pa - pb);        // may overflow to +inf: expf(-inf) = 0
    const float e = expf(-d);              // in [0, 1]
    const float inv = 1.0f / (1.0f + e);
    const float wbig = inv, wsmall = e * inv;
    const bool a_big = (pa >= pb);
    wa = a_big ? wbig : wsmall;
    wb = a_big ? wsmall : wbig;
    lse = m + log1pf(e);
}

// VW: 4 (float4) or 1 (float). U: loads per operand per thread per batch.
// aligned != 0: block b covers tokens [b*TT, b*TT+nt) x all H heads (R = TT*H rows).
// aligned == 0: block b covers rows [b*R, b*R+rows) of the flattened [T*H] row space.
template <int VW, int U>
__global__ void __launch_bounds__(NT)
merge_tile_kernel(float* __restrict__ V_out, float* __restrict__ LSE_out,
                  const float* __restrict__ V_a, const float* __restrict__ lse_a,
                  const float* __restrict__ V_b, const float* __restrict__ lse_b,
                  int T, int H, int S, int R, int TT, int aligned, long long total_rows) {
    typedef typename std::conditional<VW == 4, float4, float>::type VT;
    extern __shared__ float2 s_w[];

    const int tid = threadIdx.x;
    const long long r0 = (long long)blockIdx.x * (long long)R;

    int rows, nt = 0;
    long long t0 = 0;
    if (aligned) {
        t0 = (long long)blockIdx.x * (long long)TT;
        const long long left = (long long)T - t0;
        nt = (int)(left < (long long)TT ? left : (long long)TT);
        rows = nt * H;
    } else {
        const long long left = total_rows - r0;
        rows = (int)(left < (long long)R ? left : (long long)R);
    }

    const size_t base = (size_t)r0 * (size_t)S;
    const VT* __restrict__ A = reinterpret_cast<const VT*>(V_a + base);
    const VT* __restrict__ B = reinterpret_cast<const VT*>(V_b + base);
    VT* __restrict__ O = reinterpret_cast<VT*>(V_out + base);

    const int SV = S / VW;          // vectors per row
    const int n = rows * SV;        // vectors in this block's span

    VT a[U], b[U];

    // First batch of V loads: independent of the weights, issued before phase A.
    int start = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int idx = start + tid + u * NT;
        if (idx < n) {
            a[u] = ld_stream(A + idx);
            b[u] = ld_stream(B + idx);
        }
    }

    // Phase A: weights for every row of the tile, LSE_out.
    if (aligned) {
        for (int i = tid; i < rows; i += NT) {
            const int h = i / nt;
            const int tt = i - h * nt;
            const size_t g = (size_t)h * (size_t)T + (size_t)(t0 + tt);
            const float pa = __ldg(lse_a + g);
            const float pb = __ldg(lse_b + g);
            float wa, wb, lse;
            lse_weights(pa, pb, wa, wb, lse);
            s_w[tt * H + h] = make_float2(wa, wb);
            if (LSE_out != nullptr) LSE_out[g] = lse;
        }
    } else {
        for (int i = tid; i < rows; i += NT) {
            const long long row = r0 + i;
            const long long t = row / H;
            const long long h = row - t * H;
            const size_t g = (size_t)h * (size_t)T + (size_t)t;
            const float pa = __ldg(lse_a + g);
            const float pb = __ldg(lse_b + g);
            float wa, wb, lse;
            lse_weights(pa, pb, wa, wb, lse);
            s_w[i] = make_float2(wa, wb);
            if (LSE_out != nullptr) LSE_out[g] = lse;
        }
    }
    __syncthreads();

    // Phase B: stream the span.
    const int qs = NT / SV;   // whole rows advanced per NT vectors
    const int rs = NT % SV;   // remaining columns advanced per NT vectors
    while (true) {
        const int idx0 = start + tid;
        int r = idx0 / SV;
        int c = idx0 - r * SV;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int idx = idx0 + u * NT;
            if (idx < n) {
                const float2 ww = s_w[r];
                st_stream(O + idx, mix(a[u], b[u], ww.x, ww.y));
            }
            r += qs;
            c += rs;
            if (c >= SV) { c -= SV; ++r; }
        }
        start += NT * U;
        if (start >= n) break;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int idx = start + tid + u * NT;
            if (idx < n) {
                a[u] = ld_stream(A + idx);
                b[u] = ld_stream(B + idx);
            }
        }
    }
}

extern "C" void merge_attn_states(float* V_out, float* LSE_out, const float* V_a,
                                  const float* lse_a, const float* V_b, const float* lse_b,
                                  int num_tokens, int num_heads, int head_size) {
    const int T = num_tokens, H = num_heads, S = head_size;
    if (T > 0 && H > 0 && S > 0) {
        const long long total_rows = (long long)T * (long long)H;
        const long long P = (long long)H * (long long)S;   // floats per token

        const bool vec = (S % 4 == 0) &&
                         ((((uintptr_t)V_out) | ((uintptr_t)V_a) | ((uintptr_t)V_b)) & 15u) == 0;
        const double bytes = 12.0 * (double)total_rows * (double)S;
        const bool big = bytes >= 75e6;

        const long long max_rows_smem = SMEM_MAX_BYTES / 8;   // float2 per row
        int aligned;
        long long R, TT = 1, grid;
        if ((long long)H <= max_rows_smem && P <= 4 * TARGET_FLOATS) {
            aligned = 1;
            TT = TARGET_FLOATS / P;
            if (TT < 1) TT = 1;
            const long long tt_smem = max_rows_smem / H;
            if (TT > tt_smem) TT = tt_smem;
            if (TT > T) TT = T;
            const long long min_grid = (long long)NUM_SMS * 4;
            while (TT > 1 && ((long long)T + TT - 1) / TT < min_grid) TT = TT / 2;
            if (TT < 1) TT = 1;
            R = TT * H;
            grid = ((long long)T + TT - 1) / TT;
        } else {
            aligned = 0;
            R = TARGET_FLOATS / S;
            if (R < 1) R = 1;
            if (R > max_rows_smem) R = max_rows_smem;
            if (R > total_rows) R = total_rows;
            grid = (total_rows + R - 1) / R;
        }
        const size_t smem = (size_t)R * sizeof(float2);

        if (vec && big) {
            merge_tile_kernel<4, 8><<<(unsigned)grid, NT, smem>>>(
                V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, (int)R, (int)TT, aligned,
                total_rows);
        } else if (vec) {
            merge_tile_kernel<4, 4><<<(unsigned)grid, NT, smem>>>(
                V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, (int)R, (int)TT, aligned,
                total_rows);
        } else {
            merge_tile_kernel<1, 8><<<(unsigned)grid, NT, smem>>>(
                V_out, LSE_out, V_a, lse_a, V_b, lse_b, T, H, S, (int)R, (int)TT, aligned,
                total_rows);
        }
    }
    cudaDeviceSynchronize();
}
