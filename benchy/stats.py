"""Statistics over repeated measurements: median ± sample std, n, bootstrap 95% CI, percentiles."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats as sps

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0  # fixed: the same results file always yields the same interval


def summarize(values: list[float]) -> dict:
    """{median, std, n, ci95, mean, min, max, p90, p99}. std is the sample std (n − 1);
    ci95 is a percentile-bootstrap interval of the median (None below 3 values)."""
    arr = np.asarray(values, dtype=float)
    n = int(arr.size)
    if n == 0:
        raise ValueError("summarize() needs at least one value")
    return {
        "median": float(np.median(arr)),
        "std": float(np.std(arr, ddof=1)) if n > 1 else None,
        "n": n,
        "ci95": median_ci95(arr),
        "mean": float(arr.mean()),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "p90": float(np.percentile(arr, 90)),
        "p99": float(np.percentile(arr, 99)),
    }


def median_ci95(arr: np.ndarray) -> list[float] | None:
    if arr.size < 3:
        return None
    if np.all(arr == arr[0]):
        return [float(arr[0]), float(arr[0])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples are expected for tiny n
        res = sps.bootstrap(
            (arr,),
            np.median,
            confidence_level=0.95,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]
