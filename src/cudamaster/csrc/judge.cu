// The coordinator's host-side judge of an output against its float64 oracle, in one pass: what
// cudamaster.bench.verify's numpy formulation computes in a dozen passes over memory. Host code
// only (nvcc hands it to the host compiler); built by the harness itself, never by an
// implementation. Every expression is the numpy one, in the same order, so the two agree bit
// for bit (tests/test_verify.py checks it on random outputs with NaN, infinities and budgets).
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { GOT_F32 = 0, GOT_BF16 = 1, GOT_I32 = 2, GOT_F64 = 3 };
enum { RULE_NONE = -1, RULE_ABS = 0, RULE_REL = 1 };
#define CM_MISMATCHES 5

struct cm_part {
    long long failed, nan_count, paper_failed;
    double max_err, max_ratio;
    int has_ratio;     // some element had a defined (non-NaN) error ratio
    int err_defined;   // some element had a defined (non-NaN) error
    int n_mismatches;  // the first failing indices, up to CM_MISMATCHES
    long long mismatches[CM_MISMATCHES];
};

static inline float bits_to_f32(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline double stored_value(const void* got, int kind, long long i) {
    switch (kind) {
        case GOT_F32: return (double)((const float*)got)[i];
        case GOT_BF16: return (double)bits_to_f32((uint32_t)((const uint16_t*)got)[i] << 16);
        case GOT_I32: return (double)((const int32_t*)got)[i];
        default: return ((const double*)got)[i];
    }
}

// The oracle as the output's dtype would hold it: float64 -> float32 (-> bf16, nearest even).
static inline double rounded_ref(double r, int out_kind) {
    if (out_kind == GOT_I32 || out_kind == GOT_F64) return r;
    float f = (float)r;
    if (out_kind != GOT_BF16) return (double)f;
    if (isnan(f)) return (double)bits_to_f32(0x7FC0u << 16);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint32_t rounding = ((bits >> 16) & 1u) + 0x7FFFu;
    return (double)bits_to_f32(((bits + rounding) >> 16) << 16);
}

// Judge elements [lo, hi). out_kind is the output's dtype for the original benchmark's rule;
// mag (or NULL) holds float64, or float32 with mag_kind GOT_F32 (the oracles of the largest
// outputs keep their magnitudes in float32: a float64 copy would be 8 GiB at 2^30 elements).
extern "C" void cm_judge(const void* got, int kind, int out_kind, const double* ref,
                         const void* mag, int mag_kind, long long lo, long long hi, double rtol,
                         double atol, double mtol, int rule, double rule_tol, cm_part* out) {
    cm_part p;
    memset(&p, 0, sizeof p);
    int err_nan = 0;
    for (long long i = lo; i < hi; ++i) {
        double g = stored_value(got, kind, i), r = ref[i];
        double abs_r = fabs(r);
        double bound = rtol * abs_r;
        bound += atol;
        if (mtol != 0.0) bound += mtol * (mag ? stored_value(mag, mag_kind, i) : abs_r);
        double err = fabs(g - r);
        int ok = err <= bound;
        if (isnan(err) && g == r) {  // equal infinities: inf - inf is NaN, yet exact
            err = 0.0;
            ok = 1;
        }
        if (isnan(err)) {
            err_nan = 1;
        } else {
            p.err_defined = 1;
            if (err > p.max_err) p.max_err = err;
        }
        if (isnan(g)) ++p.nan_count;
        double ratio = err / bound;
        if (!isnan(ratio) && (!p.has_ratio || ratio > p.max_ratio)) {
            p.max_ratio = ratio;
            p.has_ratio = 1;
        }
        if (!ok) {
            if (p.n_mismatches < CM_MISMATCHES) p.mismatches[p.n_mismatches++] = i;
            ++p.failed;
        }
        if (rule != RULE_NONE) {
            double rd = rounded_ref(r, out_kind);
            double diff = fabs(g - rd);
            int paper_ok;
            if (rule == RULE_ABS) {
                paper_ok = diff < rule_tol;
            } else {
                double ag = fabs(g), ar = fabs(rd);
                double m = (isnan(ag) || isnan(ar)) ? NAN : (ag > ar ? ag : ar);
                int zero = g == 0.0 || rd == 0.0;
                paper_ok = g == rd || (zero ? diff < rule_tol : diff / m < rule_tol);
            }
            p.paper_failed += !paper_ok;
        }
    }
    if (err_nan || isinf(p.max_err)) p.max_err = INFINITY;
    *out = p;
}
