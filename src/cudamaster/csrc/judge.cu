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

template <int KIND>
static inline double stored_value(const void* got, long long i) {
    if (KIND == GOT_F32) return (double)((const float*)got)[i];
    if (KIND == GOT_BF16) return (double)bits_to_f32((uint32_t)((const uint16_t*)got)[i] << 16);
    if (KIND == GOT_I32) return (double)((const int32_t*)got)[i];
    return ((const double*)got)[i];
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

// Below SAFE_LOW times a product, a quotient is certainly smaller than the product's factor;
// above SAFE_HIGH times it, certainly larger (each rounding moves a result by at most 2^-53 of
// it, and the margin of 2^-50 also keeps a quotient that is certainly smaller from rounding up
// to the factor). Products outside [TINY, HUGE] are not trusted to that precision. The loop
// divides only where these bounds do not decide, and so gives what dividing everywhere gives.
static const double SAFE_LOW = 1.0 - 0x1p-50, SAFE_HIGH = 1.0 + 0x1p-50;
static const double TINY = 0x1p-960, HUGE = 0x1p960;

// The loop of cm_judge for one storage of the output (KIND) and of the magnitudes (MAG: a GOT_
// kind, or -1 for none), so that no element pays for a switch.
template <int KIND, int MAG>
static void judge_loop(const void* got, int out_kind, const double* ref, const void* mag,
                       long long lo, long long hi, double rtol, double atol, double mtol,
                       int rule, double rule_tol, cm_part* out) {
    cm_part p;
    memset(&p, 0, sizeof p);
    int err_nan = 0;
    for (long long i = lo; i < hi; ++i) {
        double g = stored_value<KIND>(got, i), r = ref[i];
        double abs_r = fabs(r);
        double bound = rtol * abs_r;
        bound += atol;
        if (mtol != 0.0) bound += mtol * (MAG >= 0 ? stored_value<MAG>(mag, i) : abs_r);
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
        // the ratio err / bound, unless it certainly does not exceed the largest so far: 0 where
        // that is not negative, or below it as the bounds above say
        double below = p.max_ratio * bound;
        int exact = err == 0.0 && bound > 0.0 && p.max_ratio >= 0.0;
        int smaller = bound > 0.0 && below >= TINY && below <= HUGE && err < below * SAFE_LOW;
        if (!(p.has_ratio && (exact || smaller))) {
            double ratio = err / bound;
            if (!isnan(ratio) && (!p.has_ratio || ratio > p.max_ratio)) {
                p.max_ratio = ratio;
                p.has_ratio = 1;
            }
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
                if (g == rd) {
                    paper_ok = 1;
                } else if (zero) {
                    paper_ok = diff < rule_tol;
                } else {  // diff / m < rule_tol, dividing only where the bounds do not decide
                    double limit = rule_tol * m;
                    int sure = limit >= TINY && limit <= HUGE;
                    if (sure && diff < limit * SAFE_LOW) {
                        paper_ok = 1;
                    } else if (sure && diff > limit * SAFE_HIGH) {
                        paper_ok = 0;
                    } else {
                        paper_ok = diff / m < rule_tol;
                    }
                }
            }
            p.paper_failed += !paper_ok;
        }
    }
    if (err_nan || isinf(p.max_err)) p.max_err = INFINITY;
    *out = p;
}

template <int KIND>
static void judge_kind(const void* got, int out_kind, const double* ref, const void* mag,
                       int mag_kind, long long lo, long long hi, double rtol, double atol,
                       double mtol, int rule, double rule_tol, cm_part* out) {
    if (!mag) {
        judge_loop<KIND, -1>(got, out_kind, ref, mag, lo, hi, rtol, atol, mtol, rule, rule_tol,
                             out);
    } else if (mag_kind == GOT_F32) {
        judge_loop<KIND, GOT_F32>(got, out_kind, ref, mag, lo, hi, rtol, atol, mtol, rule,
                                  rule_tol, out);
    } else {
        judge_loop<KIND, GOT_F64>(got, out_kind, ref, mag, lo, hi, rtol, atol, mtol, rule,
                                  rule_tol, out);
    }
}

// Judge elements [lo, hi). out_kind is the output's dtype for the original benchmark's rule;
// mag (or NULL) holds float64, or float32 with mag_kind GOT_F32 (the oracles of the largest
// outputs keep their magnitudes in float32: a float64 copy would be 8 GiB at 2^30 elements).
extern "C" void cm_judge(const void* got, int kind, int out_kind, const double* ref,
                         const void* mag, int mag_kind, long long lo, long long hi, double rtol,
                         double atol, double mtol, int rule, double rule_tol, cm_part* out) {
    switch (kind) {
        case GOT_F32:
            judge_kind<GOT_F32>(got, out_kind, ref, mag, mag_kind, lo, hi, rtol, atol, mtol,
                                rule, rule_tol, out);
            break;
        case GOT_BF16:
            judge_kind<GOT_BF16>(got, out_kind, ref, mag, mag_kind, lo, hi, rtol, atol, mtol,
                                 rule, rule_tol, out);
            break;
        case GOT_I32:
            judge_kind<GOT_I32>(got, out_kind, ref, mag, mag_kind, lo, hi, rtol, atol, mtol,
                                rule, rule_tol, out);
            break;
        default:
            judge_kind<GOT_F64>(got, out_kind, ref, mag, mag_kind, lo, hi, rtol, atol, mtol,
                                rule, rule_tol, out);
    }
}
