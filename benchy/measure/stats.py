"""Statistics, all of benchy's: a case's median ± sample std, n, bootstrap 95% CI and
percentiles, and the tests `benchy compare` uses (Mann–Whitney U / Welch, Benjamini–Hochberg,
bootstrap interval of a difference in medians). Imports no plotting library, and scipy (a
third of a second) only for `benchy compare`'s tests: a run's summaries draw their bootstrap
with numpy alone."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

# A p90 or p99 is stated with MLPerf's early-stopping confidence: 99% that the true percentile
# lies at or above its interval's low end, 99% that it lies at or below its high end.
PERCENTILE_CONFIDENCE = 0.99
TOO_FEW = "too few"


@functools.lru_cache(maxsize=256)  # a case's metrics share their n
def percentile_ranks(n: int, q: float, confidence: float = PERCENTILE_CONFIDENCE) -> tuple[int | None, int | None]:
    """1-based ranks (low, high) of the sorted values that bound the true q-th percentile, each
    side at `confidence`, whatever the distribution: the count of values below the true
    percentile is Binomial(n, q/100), so the k-th smallest lies at or above it with
    probability P(count ≤ k − 1). high is None when only the largest value (or none) would
    do: a single outlier sets the largest, so it bounds nothing: "too few" (MLPerf's early-
    stopping rule: 64 values for a p90, 662 for a p99). low is None when no value would do."""
    if n < 1:
        return None, None
    cdf = _binomial_cdf(n, q / 100)
    high = int(np.searchsorted(cdf, confidence - 1e-12)) + 1  # smallest k: P(count ≤ k − 1) ≥ conf
    low = int(np.searchsorted(cdf, 1 - confidence + 1e-12))  # largest j: P(count ≥ j) ≥ conf
    return (low if low >= 1 else None), (high if high <= n - 1 else None)


def _binomial_cdf(n: int, p: float) -> np.ndarray:
    """P(Binomial(n, p) ≤ k) for k = 0..n, from the log pmf's recurrence (numpy alone: no scipy
    on a run's path)."""
    k = np.arange(n, dtype=float)
    steps = np.log(n - k) - np.log(k + 1) + math.log(p / (1 - p))
    log_pmf = n * math.log1p(-p) + np.concatenate(([0.0], np.cumsum(steps)))
    return np.cumsum(np.exp(log_pmf))


def percentile_interval(ordered: np.ndarray, q: float) -> tuple[float | None, float | None]:
    """The values at percentile_ranks of sorted `ordered`: (low, high), None where none bounds."""
    low, high = percentile_ranks(int(ordered.size), q)
    return (
        None if low is None else float(ordered[low - 1]),
        None if high is None else float(ordered[high - 1]),
    )


def _fewest_for(q: float) -> int:
    """The fewest values whose q-th percentile has a high bound (percentile_ranks): where
    P(count ≥ n − 1) = p^n + n(1 − p)p^(n−1) first falls to 1 − confidence."""
    p, n = q / 100, 2
    while p**n + n * (1 - p) * p ** (n - 1) > 1 - PERCENTILE_CONFIDENCE:
        n += 1
    return n


# The fewest values a report shows a statistic from (results.json keeps every one): a p90 or
# p99 from the rule above (percentile_ranks); a bootstrap interval of the median from fewer
# than ten resamples so few distinct values that it says nothing. Below: "too few".
SHOWN_FROM = {"p90": _fewest_for(90), "p99": _fewest_for(99), "ci95": 10}


def enough_for(statistic: str, n: int) -> bool:
    """Whether `n` values carry `statistic` (p90, p99, ci95) in a report; others always do. The
    one place that decides "too few": for a percentile, exactly when its interval has a high end."""
    return n >= SHOWN_FROM.get(statistic, 1)


BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0  # fixed: the same results file always yields the same interval
# Resamples drawn at once: bounds memory for cases with many requests (all 2,000 of 20,000
# values at once held 640 MB) and is faster; the interval is the same (one random stream).
BOOTSTRAP_CHUNK = 250
BOOTSTRAP_CHUNK_VALUES = 500_000  # at most this many resampled values at once (4 MB of floats)


def _resamples_at_once(n: int) -> int:
    return max(1, min(BOOTSTRAP_CHUNK, BOOTSTRAP_CHUNK_VALUES // max(n, 1)))


def median(values: Iterable[float]) -> float:
    """The median of a non-empty collection, as a float (every check's middle value)."""
    return float(np.median(list(values)))


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0–100, numpy's linear interpolation) of a non-empty collection."""
    return float(np.percentile(np.asarray(list(values), dtype=float), q))


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """{median, std, n, ci95, mean, min, max, p90, p99, p90_low, p90_high, p99_low, p99_high}.
    std is the sample std (n − 1); ci95 is a percentile-bootstrap interval of the median (None
    below 3 values); pXX_low/high bound the true percentile (percentile_ranks)."""
    return summarize_all([values])[0]


def summarize_all(samples: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """summarize of each sample; the bootstrap of samples of one length is drawn once for all
    of them (median_ci95_all: each interval is still the one its own draw gives)."""
    arrays = [np.asarray(values, dtype=float) for values in samples]
    if any(arr.size == 0 for arr in arrays):
        raise ValueError("summarize() needs at least one value")
    return [_summary(arr, ci95) for arr, ci95 in zip(arrays, median_ci95_all(arrays), strict=True)]


def _summary(arr: np.ndarray, ci95: list[float] | None) -> dict[str, Any]:
    n = int(arr.size)
    return {
        "median": float(np.median(arr)),
        "std": float(np.std(arr, ddof=1)) if n > 1 else None,
        "n": n,
        "ci95": ci95,
        "mean": float(arr.mean()),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "p90": float(np.percentile(arr, 90)),
        "p99": float(np.percentile(arr, 99)),
        **_percentile_bounds(arr),
    }


def _percentile_bounds(arr: np.ndarray) -> dict[str, Any]:
    """p90_low, p90_high, p99_low, p99_high (percentile_interval; NaNs sort last, so a sample
    holding one has none)."""
    ordered = np.sort(arr)
    found: dict[str, Any] = {}
    for q in (90, 99):
        low, high = percentile_interval(ordered, q) if not np.isnan(ordered[-1]) else (None, None)
        found[f"p{q}_low"], found[f"p{q}_high"] = low, high
    return found


def median_ci95(arr: np.ndarray) -> list[float] | None:
    """The percentile-bootstrap 95% interval of the median: scipy.stats.bootstrap's (method
    "percentile", our seed), drawn the same way — rng.integers resamples, their medians, the
    linear (Hyndman–Fan 7) quantiles of those — without importing scipy (a third of a second
    of every run's CPU). tests/test_scale.py holds it equal to scipy's, bit for bit."""
    return median_ci95_all([arr])[0]


def median_ci95_all(arrays: Sequence[np.ndarray]) -> list[list[float] | None]:
    """median_ci95 of each array. Every interval's draw starts from the same seed, so arrays of
    one length resample the same indices: those are drawn once for all of them (a case's
    metrics share their requests; 2,000 resamples of 200,000 indices take a second to draw)."""
    found: list[list[float] | None] = [None] * len(arrays)
    by_length: dict[int, list[int]] = {}
    for i, arr in enumerate(arrays):
        if arr.size < 3:
            continue
        if np.all(arr == arr[0]):
            found[i] = [float(arr[0]), float(arr[0])]
        elif np.isnan(arr).any():
            found[i] = _interval(_medians_by_partition(arr, np.random.default_rng(BOOTSTRAP_SEED)))
        else:
            by_length.setdefault(int(arr.size), []).append(i)
    for n, group in by_length.items():
        for i, medians in zip(group, _medians_by_counting_all([arrays[i] for i in group], n), strict=True):
            found[i] = _interval(medians)
    return found


def _interval(medians: list[np.ndarray]) -> list[float]:
    """The percentile interval of the resamples' medians (scipy's linear quantiles)."""
    alpha = (1 - 0.95) / 2
    low, high = _linear_quantiles(np.concatenate(medians), np.array([alpha, 1 - alpha]))
    return [float(low), float(high)]


def _batches(n: int) -> Iterator[int]:
    """How many resamples each draw makes, in order (bounded memory, one random stream)."""
    at_once = _resamples_at_once(n)
    for k in range(0, BOOTSTRAP_RESAMPLES, at_once):
        yield min(at_once, BOOTSTRAP_RESAMPLES - k)


def _medians_by_partition(arr: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Each resample's np.median: scipy's arithmetic, with its NaN (a NaN makes the median one)."""
    n = int(arr.size)
    return [np.median(arr[rng.integers(0, n, (rows, n))], axis=-1) for rows in _batches(n)]


def _medians_by_counting_all(
    arrays: list[np.ndarray], n: int, rng: np.random.Generator | None = None
) -> list[list[np.ndarray]]:
    """Each array's resampled medians (all of length n), the resamples drawn once for all: the
    same medians as _medians_by_partition, bit for bit, from the same draws, without
    partitioning each resample (5 of the 6.6 s that 200,000 values took). A
    resample's k-th smallest value is the sorted values' entry at the first rank whose
    cumulative count of draws passes k; the median is that entry (odd n), or the mean of the
    two middle ones as np.median takes it, (a + b) / 2."""
    rng = rng or np.random.default_rng(BOOTSTRAP_SEED)
    sorted_ = []  # each array's values in order, and each value's rank in it
    for arr in arrays:
        order = np.argsort(arr, kind="stable")
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n)
        sorted_.append((arr[order], rank))
    lo, hi = (n - 1) // 2, n // 2
    medians: list[list[np.ndarray]] = [[] for _ in arrays]
    for rows in _batches(n):
        drawn = rng.integers(0, n, (rows, n))
        offsets = (np.arange(rows) * n)[:, None]  # one bincount for the batch: row i's ranks offset by i·n
        for (ordered, rank), found in zip(sorted_, medians, strict=True):
            ranks = rank[drawn]
            ranks += offsets
            below = np.cumsum(np.bincount(ranks.ravel(), minlength=rows * n).reshape(rows, n), axis=1)
            low = ordered[[np.searchsorted(row, lo, side="right") for row in below]]
            if lo == hi:
                found.append(low)
            else:
                found.append((low + ordered[[np.searchsorted(row, hi, side="right") for row in below]]) / 2)
    return medians


def _linear_quantiles(values: np.ndarray, p: np.ndarray) -> np.ndarray:
    """scipy.stats.quantile(values, p) with its default method ("linear"), in its arithmetic:
    index j = p·n + (1 − p) − 1, weight g = its fraction, (1 − g)·y[j] + g·y[j + 1]."""
    y = np.sort(values)
    n = y.size
    jg = p * n + (1 - p)
    upper = jg // 1
    lower = upper - 1
    g = np.where(lower < 0, 0.0, jg % 1)
    lower, upper = np.clip(lower, 0.0, n - 1).astype(np.int64), np.clip(upper, 0.0, n - 1).astype(np.int64)
    quantiles: np.ndarray = (1 - g) * y[lower] + g * y[upper]
    return quantiles


# ------------------------------------------------------------------ comparing two samples (benchy compare)


def p_value(a: list[float], b: list[float], test: str) -> float:
    """Two-sided p of `test` ("welch": Welch's t-test, else Mann–Whitney U); 1 when undefined."""
    from scipy import stats as sps

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant samples: scipy warns, we map nan to 1
        if test == "welch":
            p = sps.ttest_ind(a, b, equal_var=False).pvalue
        else:
            p = sps.mannwhitneyu(a, b, alternative="two-sided").pvalue
    return 1.0 if p is None or math.isnan(p) else float(p)


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Adjusted p-values that control the false discovery rate (Benjamini & Hochberg, 1995):
    adjusted p_(i) = min over j ≥ i of p_(j) · m / j, p sorted ascending, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p_values[i] * m / rank)
        adjusted[i] = running
    return adjusted


def smallest_possible_p(n_a: int, n_b: int, test: str) -> float:
    """The lowest p the test can give for these sample sizes (complete separation for
    Mann–Whitney: 2 / C(n_a + n_b, n_a)). Above alpha, "no difference" would mean nothing."""
    if min(n_a, n_b) < 2:
        return 1.0
    if test == "welch":
        return 0.0
    return 2.0 / math.comb(n_a + n_b, n_a)


def median_difference_ci(a: list[float], b: list[float]) -> list[float]:
    """95% percentile-bootstrap interval of median(B) − median(A), A and B resampled apart."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    arr_a, arr_b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diffs = []
    for start in range(0, BOOTSTRAP_RESAMPLES, BOOTSTRAP_CHUNK):
        k = min(BOOTSTRAP_CHUNK, BOOTSTRAP_RESAMPLES - start)
        med_a = np.median(rng.choice(arr_a, (k, arr_a.size)), axis=1)
        med_b = np.median(rng.choice(arr_b, (k, arr_b.size)), axis=1)
        diffs.append(med_b - med_a)
    low, high = np.percentile(np.concatenate(diffs), [2.5, 97.5])
    return [float(low), float(high)]


# ------------------------------------------------------------------ a proportion (benchy capacity)

INTERVAL_METHODS = ("wilson", "exact")  # exact: Clopper–Pearson


def proportion_interval(successes: int, n: int, confidence: float = 0.95, method: str = "wilson") -> list[float]:
    """Two-sided `confidence` interval of a success probability from `successes` of `n`
    Bernoulli trials: Wilson's score interval (good coverage at small n, never outside [0, 1])
    or Clopper–Pearson's exact one (never below its confidence; wider). Both from scipy's
    binomtest. ValueError for n < 1 or successes outside 0..n."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"proportion_interval needs 0 ≤ successes ≤ n and n ≥ 1, got {successes} of {n}")
    from scipy import stats as sps

    ci = sps.binomtest(successes, n).proportion_ci(confidence_level=confidence, method=method)
    return [float(ci.low), float(ci.high)]


# ------------------------------------------------------------------ probe-cache's one-sided tests


def log_welch_less(a: np.ndarray, b: np.ndarray) -> float:
    """One-sided p-value that log a is smaller on average than log b (Welch's t-test)."""
    la, lb = np.log(a), np.log(b)
    if np.ptp(la) == 0 and np.ptp(lb) == 0:  # no spread at all: the t statistic is undefined
        return 0.0 if la[0] < lb[0] else 1.0
    from scipy import stats as sps

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # near-identical samples: scipy warns, the p-value stands
        return float(sps.ttest_ind(la, lb, equal_var=False, alternative="less").pvalue)


def exact_rank_less(a: np.ndarray, b: np.ndarray, alpha: float = 0.05) -> float | None:
    """Exact one-sided Mann–Whitney U p-value that a is smaller; None when the samples are too
    small for any outcome to reach `alpha` (then the test says nothing)."""
    if 1 / math.comb(a.size + b.size, a.size) >= alpha:
        return None
    from scipy import stats as sps

    return float(sps.mannwhitneyu(a, b, alternative="less", method="exact").pvalue)


def line_through(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points; a flat line at the
    median when the xs do not differ (no slope to take)."""
    if len(set(xs)) < 2:
        return median(ys), 0.0
    slope, intercept = np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), 1)
    return float(intercept), float(slope)


def trend(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """(p, intercept, slope): Kendall's tau p-value of y against x (a monotone trend, whatever
    its shape, beyond chance) and the Theil–Sen line through the points (robust to a stray one)."""
    from scipy import stats as sps

    p_value = float(sps.kendalltau(x, y).pvalue)
    slope, intercept, *_ = sps.theilslopes(y, x)
    return p_value, float(intercept), float(slope)
