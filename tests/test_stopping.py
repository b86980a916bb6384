"""The adaptive stopping rule of `time` (workloads/stopping.py), with samples from known
distributions and a fake clock: no GPU, no torch."""
import math
import random

import pytest

from workloads.stopping import StopRule, measure, median_ci, noise_pct


class FakeClock:
    def __init__(self, cost_s):
        self.t, self.cost_s = 0.0, cost_s

    def __call__(self):
        return self.t


def _run(rule, draw, cost_s=1e-4):
    clock = FakeClock(cost_s)

    def take(n):
        clock.t += n * cost_s
        return [draw() for _ in range(n)]

    return measure(rule, take, clock), clock.t


def test_converges_on_a_tight_distribution_and_reports_the_noise_it_reached():
    rng = random.Random(1)
    samples, _ = _run(StopRule(max_noise_pct=0.5), lambda: rng.gauss(100.0, 1.0))
    # the median's CI half-width of N(100, 1) is about 1.96 * 1.25 / sqrt(n): 0.5 % needs ~25
    assert 10 <= len(samples) <= 80
    assert noise_pct(samples) <= 0.5
    assert StopRule(max_noise_pct=0.5).converged(samples)


def test_tighter_noise_takes_more_samples():
    rng = random.Random(2)
    loose, _ = _run(StopRule(max_noise_pct=1.0), lambda: rng.gauss(100.0, 2.0))
    tight, _ = _run(StopRule(max_noise_pct=0.1, max_time_s=100), lambda: rng.gauss(100.0, 2.0))
    assert len(tight) > 20 * len(loose) / 2
    assert noise_pct(tight) <= 0.1 < noise_pct(loose[:10])


def test_a_wide_distribution_stops_at_max_time_and_is_not_converged():
    rng = random.Random(3)
    rule = StopRule(max_noise_pct=0.5, max_time_s=0.05)
    samples, elapsed = _run(rule, lambda: rng.lognormvariate(0, 1.5), cost_s=1e-4)
    assert elapsed >= 0.05 and elapsed < 0.05 * 1.5  # one batch past the limit at most
    assert not rule.converged(samples)
    assert noise_pct(samples) > 0.5


def test_outliers_barely_move_the_noise_figure():
    rng = random.Random(4)
    base = [rng.gauss(100.0, 1.0) for _ in range(400)]
    spiky = base[:380] + [1e4] * 20  # 5 % of samples 100x slower (a preempted launch)
    assert noise_pct(spiky) < 2 * noise_pct(base)


def test_fixed_iters_means_exactly_that_many_samples():
    rng = random.Random(5)
    samples, _ = _run(StopRule(iters=37, max_time_s=1e-9), lambda: rng.lognormvariate(0, 2))
    assert len(samples) == 37
    assert StopRule(iters=37).converged(samples)


def test_min_samples_and_min_time_hold_even_when_converged():
    samples, elapsed = _run(StopRule(min_samples=50, min_time_s=0.2), lambda: 100.0, cost_s=1e-3)
    assert len(samples) >= 50 and elapsed >= 0.2


def test_the_interval_covers_the_true_median_95_percent_of_the_time():
    rng = random.Random(6)
    hits = 0
    trials = 2000
    for _ in range(trials):
        xs = [rng.expovariate(1.0) for _ in range(41)]
        _, lo, hi = median_ci(xs)
        hits += lo <= math.log(2) <= hi
    assert 0.93 <= hits / trials <= 0.99


def test_keep_sees_every_batch():
    seen = []
    rng = random.Random(7)
    clock = FakeClock(0)
    measure(StopRule(iters=30), lambda n: [rng.random() for _ in range(n)], clock, keep=lambda s: seen.append(len(s)))
    assert seen == [30]


@pytest.mark.parametrize("n", [0, 1, 4])
def test_too_few_samples_have_no_noise_figure(n):
    assert noise_pct([1.0] * n) == math.inf
