import numpy as np

from cudamaster.bench.verify import allowed_failures, compare, recheck
from cudamaster.tasks import PaperRule, Tolerance

TOL = Tolerance(rtol=1e-6, atol=1e-7)
ABS = PaperRule(kind="abs", tol=1e-2)


def test_nan_always_fails():
    ref = np.ones(8)
    got = ref.copy()
    got[3] = np.nan
    r = compare("y", got, ref, None, TOL, ABS, "f32")
    assert not r.passed and r.nan_count == 1 and r.failed == 1
    assert not r.paper_rule_passed


def test_exact_and_reordered_sums_pass_real_errors_fail():
    rng = np.random.default_rng(1)
    terms = rng.uniform(-1, 1, (64, 4096)).astype(np.float32)
    ref = terms.astype(np.float64).sum(axis=1)
    mag = np.abs(terms.astype(np.float64)).sum(axis=1)
    tol = Tolerance(rtol=1e-6, mtol=2e-6)
    sequential = np.array([np.float32(0) + np.cumsum(t, dtype=np.float32)[-1] for t in terms])
    pairwise = terms.sum(axis=1, dtype=np.float32)
    assert compare("y", sequential, ref, mag, tol, ABS, "f32").passed
    assert compare("y", pairwise, ref, mag, tol, ABS, "f32").passed
    dropped = sequential - terms[:, -1]  # off by one: the last term is missing
    assert not compare("y", dropped, ref, mag, tol, ABS, "f32").passed


def test_equal_infinities_pass():
    ref = np.array([np.inf, -np.inf, 1.0])
    assert compare("y", ref.copy(), ref, None, TOL, ABS, "f32").passed
    exact = Tolerance(rtol=0.0)  # where 0 * inf leaves no bound at all
    assert compare("y", ref.copy(), ref, None, exact, ABS, "f32").passed
    assert not compare("y", -ref, ref, None, exact, ABS, "f32").passed


def test_budget_matches_the_original_counts():
    # the spec's allowed failures for 1% of N = 1024 .. 2^18
    assert [allowed_failures(0.01, 2**k) for k in (10, 12, 14, 16, 18)] == [10, 40, 163, 655, 2621]
    assert allowed_failures(0.0, 10**6) == 0


def test_failure_report_names_the_first_mismatch():
    ref = np.arange(10, dtype=np.float64) + 1
    got = ref.copy()
    got[7] = 0.0
    r = compare("C", got, ref, None, TOL, ABS, "f32")
    assert r.failed == 1 and r.mismatches[0].index == [7]
    assert "expected 8" in r.summary() and "got 0" in r.summary()


def test_paper_rel_rule_uses_absolute_test_at_zero():
    rel = PaperRule(kind="rel", tol=1e-3)
    ref = np.array([0.0, 100.0])
    got = np.array([5e-4, 100.05])
    assert compare("y", got, ref, None, Tolerance(rtol=1.0, atol=1.0), rel, "f32").paper_rule_passed
    got = np.array([2e-3, 100.0])
    assert not compare(
        "y", got, ref, None, Tolerance(rtol=1.0, atol=1.0), rel, "f32"
    ).paper_rule_passed


def test_chunked_judgement_matches_and_reads_storage(monkeypatch):
    from cudamaster.bench import verify
    from cudamaster.dtypes import f32_to_bf16_bits

    rng = np.random.default_rng(3)
    ref = rng.uniform(-1, 1, 1000)
    bits = f32_to_bf16_bits(ref.astype(np.float32))
    bits[[10, 500, 999]] = 0x7FC0  # three NaNs, in different chunks
    tol = Tolerance(rtol=4e-3)
    whole = compare("y", bits, ref, None, tol, ABS, "bf16", stored=True)
    monkeypatch.setattr(verify, "CHUNK", 64)
    chunked = compare("y", bits, ref, None, tol, ABS, "bf16", stored=True)
    same = (
        "passed",
        "failed",
        "nan_count",
        "max_abs_error",
        "max_error_ratio",
        "paper_rule_passed",
    )
    assert all(getattr(whole, f) == getattr(chunked, f) for f in same)
    assert [m.index for m in whole.mismatches] == [m.index for m in chunked.mismatches]
    assert chunked.failed == 3 and chunked.nan_count == 3
    assert [m.index for m in chunked.mismatches] == [[10], [500], [999]]


def test_compiled_judge_gives_the_numpy_verdict_on_random_outputs(monkeypatch):
    """The one-pass C judge and the numpy formulation agree on every field of the verdict,
    across tolerances, both original rules, NaNs, infinities, budgets, storage formats and
    chunk edges."""
    from cudamaster.bench import judge, verify
    from cudamaster.dtypes import f32_to_bf16_bits

    assert judge.available(), "the compiled judge did not build"
    monkeypatch.setattr(verify, "CHUNK", 64)
    rng = np.random.default_rng(7)
    tolerances = [
        Tolerance(rtol=0.0),  # exact
        Tolerance(rtol=1e-6, atol=1e-7),
        Tolerance(rtol=1e-3, mtol=1e-4, budget=0.01),
    ]
    rules = [ABS, PaperRule(kind="rel", tol=1e-3), None]
    for trial in range(120):
        n = int(rng.integers(1, 2000))
        ref = rng.uniform(-4, 4, n).astype(np.float32).astype(np.float64)
        ref[rng.integers(0, n, 3)] = 0.0
        mag = np.abs(ref) + rng.uniform(0, 1, n) if trial % 2 else None
        if trial % 4 == 3:  # the sparse products' oracles keep their magnitudes in float32
            mag = mag.astype(np.float32)
        got = ref.copy()
        hits = rng.integers(0, n, int(rng.integers(0, 4)))
        steps = [1e-9, 1e-5, 2e-3, 1.5e-2, 1.0, np.nan, np.inf, -np.inf]  # both sides of the rules
        got[hits] += steps[trial % len(steps)] * rng.choice([-1, 1], hits.size)
        if trial % 5 == 0:
            ref[:2], got[:2] = np.inf, np.inf  # equal infinities pass
        tol, rule = tolerances[trial % 3], rules[trial % 3 if trial % 4 else 0]
        for stored, dtype, data in (
            (False, "f32", got),
            (True, "f32", got.astype(np.float32)),
            (True, "bf16", f32_to_bf16_bits(got.astype(np.float32))),
            (True, "i32", np.nan_to_num(got, posinf=7, neginf=-7).astype(np.int32)),
        ):
            fast = compare("y", data, ref, mag, tol, rule, dtype, stored=stored)
            with monkeypatch.context() as m:
                m.setattr(judge, "available", lambda: False)
                slow = compare("y", data, ref, mag, tol, rule, dtype, stored=stored)
            assert repr(fast) == repr(slow), (trial, dtype)  # every field, floats exactly
            assert (recheck("y", data, ref, mag, tol, dtype, stored) is None) == (
                compare("y", data, ref, mag, tol, None, dtype, stored).passed
            )


def test_compiled_judge_agrees_where_errors_lie_within_roundings_of_the_bounds(monkeypatch):
    """The C judge divides only where bounds do not decide a ratio or the relative rule; on
    errors a few roundings either side of the tolerance and of the rule, and ratios that climb
    by ties and by the smallest steps, it still gives the numpy verdict exactly."""
    from cudamaster.bench import judge, verify

    assert judge.available(), "the compiled judge did not build"
    monkeypatch.setattr(verify, "CHUNK", 97)
    rng = np.random.default_rng(11)
    n = 4000
    ref = rng.uniform(0.5, 4, n) * rng.choice([-1, 1], n)
    mag = np.abs(ref) + rng.uniform(0, 1, n)
    tol, rule = Tolerance(rtol=1e-3, mtol=1e-4, budget=0.5), PaperRule(kind="rel", tol=1e-3)
    bound = tol.rtol * np.abs(ref) + tol.atol + tol.mtol * mag
    ulps = rng.integers(-4, 5, n).astype(np.float64)
    near_bound = bound * (1 + ulps * 2.0**-52)  # ratios of 1 within roundings, up and down
    # moved towards zero (m = |ref|) by the steps of float64 nearest to the relative rule:
    # diff / m just under it (the rule passes everywhere) or at or just over it (it fails)
    steps = [ref + np.sign(ref) * k * np.spacing(ref) - np.sign(ref) * rule.tol * np.abs(ref)
             for k in range(-3, 4)]  # fmt: skip
    quotients = np.array([np.abs(g - ref) / np.abs(ref) for g in steps])
    under = np.where(quotients < rule.tol, quotients, -np.inf).argmax(axis=0)
    over = np.where(quotients >= rule.tol, quotients, np.inf).argmin(axis=0)
    near_rule = [np.choose(pick, steps) for pick in (under, over)]
    climbing = bound * np.linspace(0.5, 1.0, n)  # every element a new largest ratio
    errors = (near_bound, climbing, climbing[::-1], np.sort(near_bound))
    near_tolerance = [ref + err * rng.choice([-1, 1], n) for err in errors]
    for got in [*near_tolerance, *near_rule]:
        fast = compare("y", got, ref, mag, tol, rule, "f64")
        with monkeypatch.context() as m:
            m.setattr(judge, "available", lambda: False)
            slow = compare("y", got, ref, mag, tol, rule, "f64")
        assert repr(fast) == repr(slow)


def test_recheck_catches_a_single_wrong_element_in_a_large_output():
    ref = np.arange(1 << 20, dtype=np.float64)
    got = ref.astype(np.float32)
    assert recheck("y", got, ref, None, Tolerance(rtol=0.0), "f32", stored=True) is None
    got[(1 << 20) - 3] = 0.0
    bad = recheck("y", got, ref, None, Tolerance(rtol=0.0), "f32", stored=True)
    assert bad is not None and bad.failed == 1 and bad.mismatches[0].index == [(1 << 20) - 3]
