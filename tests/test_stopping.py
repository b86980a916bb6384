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
    taken = []

    def take(n):
        clock.t += n * cost_s
        taken.extend(draw() for _ in range(n))
        return list(taken)

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


def test_a_coarse_clock_is_never_read_finer_than_half_its_step():
    # N(2300, 60) ns read by a clock of 512 ns steps: every reading is 2048, 11% under the true
    # median. Ties used to give a zero-width interval, 0% noise and "converged" on the first batch.
    rng = random.Random(8)
    coarse = lambda: 512.0 * (rng.gauss(2300.0, 60.0) // 512)  # noqa: E731
    rule = StopRule(max_noise_pct=0.5, max_time_s=0.05)
    samples, elapsed = _run(rule, coarse)
    assert set(samples) == {2048.0} and noise_pct(samples) == math.inf
    assert elapsed >= 0.05 and not rule.converged(samples)
    # the H200's events: 32 ns steps; a 1.6 us kernel's median is known to 1%, no better
    steps = [32.0 * (rng.gauss(1616.0, 8.0) // 32) for _ in range(2000)]
    assert median_ci(steps)[1] == median_ci(steps)[2]  # the interval alone says 0
    assert noise_pct(steps) == pytest.approx(100 * 16 / median_ci(steps)[0])
    assert not StopRule(max_noise_pct=0.5).converged(steps)
    # a fine clock keeps its interval: the floor is far below it
    fine = [rng.gauss(1600.0, 20.0) for _ in range(2000)]
    _, lo, hi = median_ci(fine)
    assert noise_pct(fine) == pytest.approx(100 * (hi - lo) / 2 / median_ci(fine)[0])


def test_max_time_stops_within_a_sample_of_it_once_min_samples_are_in():
    rng = random.Random(9)
    # a wide distribution never converges: the last batch used to run up to a quarter past
    rule = StopRule(max_noise_pct=0.01, max_time_s=1.0)
    samples, elapsed = _run(rule, lambda: rng.lognormvariate(0, 1.5), cost_s=2e-3)
    assert 1.0 <= elapsed <= 1.0 + 2e-3 + 1e-9
    # slow calls: the first min_samples are taken whatever they cost, then nothing more
    samples, elapsed = _run(StopRule(max_time_s=1.0), lambda: rng.gauss(100.0, 5.0), cost_s=0.4)
    assert len(samples) == 10 and elapsed == pytest.approx(4.0)


def test_the_rule_judges_the_samples_as_the_caller_reads_them_now():
    # the caller's readings change under it (one call without a kernel-clock record: every
    # sample is read from the events instead): the rule sees that view, never a mix
    clock, seen = FakeClock(1e-4), []
    kernel, events = [], []
    rng = random.Random(10)

    def take(n):
        clock.t += n * 1e-4
        for _ in range(n):
            kernel.append(None if len(kernel) == 12 else rng.gauss(2000.0, 5.0))
            events.append(rng.gauss(5000.0, 10.0))
        view = events if None in kernel else kernel
        seen.append(list(view))
        return list(view)

    got = measure(StopRule(max_noise_pct=0.2, max_time_s=5.0), take, clock)
    assert got == seen[-1] == events and min(got) > 4000


@pytest.mark.parametrize("n", [0, 1, 4])
def test_too_few_samples_have_no_noise_figure(n):
    assert noise_pct([1.0] * n) == math.inf
