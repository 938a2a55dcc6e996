"""The adaptive repetition rule: stop once the median is known to about 1%, or at a cap."""

import numpy as np

from cudamaster.bench.timing import TimingPolicy, median_error, settled

POLICY = TimingPolicy()


def _samples(n: int, spread: float, seed: int = 0) -> list[float]:
    """n times around 1 ms whose IQR is about `spread` of the median."""
    return list(1.0 + np.random.default_rng(seed).normal(0, spread / 1.35, n))


def test_a_steady_kernel_stops_at_the_minimum_number_of_samples():
    assert not settled(_samples(POLICY.min_samples - 1, 0.01), 0.1, POLICY)
    assert settled(_samples(POLICY.min_samples, 0.01), 0.1, POLICY)


def test_a_jittery_kernel_needs_more_samples_for_the_same_precision():
    jittery = _samples(400, 0.10)
    assert not settled(jittery[:20], 0.1, POLICY)
    needed = next(n for n in range(10, 400) if settled(jittery[:n], 0.1, POLICY))
    assert 50 <= needed <= 150  # about (0.93 * 0.10 / 0.01)^2 = 86
    assert median_error(jittery[:needed]) <= POLICY.target_error


def test_the_time_cap_stops_a_slow_or_noisy_kernel_once_it_has_three_samples():
    noisy = _samples(3, 0.5)
    assert settled(noisy, POLICY.time_cap_s, POLICY)
    assert not settled(noisy[:2], POLICY.time_cap_s, POLICY)
    assert settled(noisy[:1], 4 * POLICY.time_cap_s, POLICY)  # one call of a very slow kernel


def test_fast_calls_get_longer_turns_within_bounds():
    assert POLICY.batch_for(1.0) == POLICY.batch  # a slow kernel: the minimum turn
    assert POLICY.batch_for(0.0002) == 25  # 0.2 ms per call fills a 5 ms turn
    assert POLICY.batch_for(0.00025) == 21  # 20 would fill it, but turns have odd lengths
    assert POLICY.batch_for(0.0) == POLICY.max_batch


def test_slow_calls_get_fewer_warmup_calls():
    assert POLICY.warmup_for(1e-5) == POLICY.warmup  # microseconds: every warm-up call
    assert POLICY.warmup_for(0.02) == 3
    assert POLICY.warmup_for(0.03) == 2
    assert POLICY.warmup_for(0.5) == 1  # half a second: one call warms it
