"""When `time` has taken enough samples of a variant: a small named rule, as NVBench's `stdrel`.

`noise_pct` is the half-width of the median's 95% confidence interval over the median, in
percent (the median is known to within +- that). The interval is distribution-free: the order
statistics j and k around n/2 that cover the median with 95% probability (binomial, normal
approximation), so a skewed or heavy-tailed timing distribution needs no model. It is robust
as the median is: a few outliers move it little, unlike the coefficient of variation. A clock
reads in steps (CUDA events on the H200: 32 ns), and a median of its readings is known to no
better than half a step however many of them tie: where every reading across the interval is
the same, the half-width is half the gap to the nearest other reading (two readings that differ
are a step apart already).

Pure functions of the samples: no torch, tested with samples from known distributions.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass

Z95 = 1.959964


def median_ci(samples: list[float]) -> tuple[float, float, float]:
    """(median, lower, upper) of the median's 95% confidence interval."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, math.nan
    mid = n // 2
    med = xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])
    half = Z95 * math.sqrt(n) / 2
    j = max(0, math.floor(n / 2 - half) - 1)
    k = min(n - 1, math.ceil(n / 2 + half))
    return med, xs[j], xs[k]


def noise_pct(samples: list[float]) -> float:
    """Half-width of the median's 95% CI over the median, percent; inf below 5 samples, and where
    every sample is the same reading."""
    if len(samples) < 5:
        return math.inf
    xs = sorted(samples)  # once: median_ci's sort of a sorted list is one pass
    med, lo, hi = median_ci(xs)
    if med <= 0:
        return math.inf
    width = hi - lo  # two readings of a stepped clock: one step apart at least, where they differ
    if width == 0:
        # every reading across the interval ties: the median is known to half a step, the gap
        # from them to the nearest other reading (none: the samples show no step at all)
        below, above = bisect.bisect_left(xs, lo), bisect.bisect_right(xs, hi)
        width = min(
            lo - xs[below - 1] if below else math.inf, xs[above] - hi if above < len(xs) else math.inf
        )
    return 100.0 * width / 2 / med


@dataclass(frozen=True)
class StopRule:
    """Measure until noise_pct <= max_noise_pct (after min_samples and min_time_s), or until
    max_time_s has passed, the first min_samples whatever they cost. `iters` set: exactly that
    many samples, no other rule."""

    max_noise_pct: float = 0.5
    min_samples: int = 10
    min_time_s: float = 0.0
    max_time_s: float = 1.0
    iters: int | None = None

    def batch(self, taken: int, elapsed_s: float = 0.0) -> int:
        """How many samples to take before looking again: a quarter of what is in hand
        (at least min_samples), so checking costs little however long it runs; once some are
        in, no more than the time left to max_time_s holds at their pace."""
        if self.iters is not None:
            return self.iters - taken
        n = max(self.min_samples - taken, taken // 4, 5)
        if taken and elapsed_s > 0:
            n = min(n, max(1, math.ceil((self.max_time_s - elapsed_s) * taken / elapsed_s)))
        return n

    def done(self, samples: list[float], elapsed_s: float) -> bool:
        n = len(samples)
        if self.iters is not None:
            return n >= self.iters
        if elapsed_s >= self.max_time_s and n >= 1:
            return True
        if n < self.min_samples or elapsed_s < self.min_time_s:
            return False
        return noise_pct(samples) <= self.max_noise_pct

    def converged(self, samples: list[float]) -> bool:
        """Did the samples reach the noise asked for (always true with a fixed count)?"""
        return self.iters is not None or noise_pct(samples) <= self.max_noise_pct

    def to_json(self) -> dict:
        if self.iters is not None:
            return {"iters": self.iters}
        return {
            "max_noise_pct": self.max_noise_pct,
            "min_samples": self.min_samples,
            "min_time_s": self.min_time_s,
            "max_time_s": self.max_time_s,
        }


def measure(rule: StopRule, take: Callable[[int], list[float]], clock: Callable[[], float]) -> list[float]:
    """Take batches of samples until `rule` is done. `take(n)` takes n more and returns every
    sample so far, as the caller reads them now: the rule judges that, never a mix of readings
    (a variant's samples move from the kernel clock to the events when one call has no record)."""
    samples: list[float] = []
    t0 = clock()
    while not rule.done(samples, elapsed := clock() - t0):
        samples = take(rule.batch(len(samples), elapsed))
    return samples
