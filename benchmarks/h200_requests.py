"""Per-request facts of a benchy run folder, for the H200 steps (benchmarks/h200.sh lengths, apis):
each case's prompt length asked against what the server counted (every request, not a median),
its warnings, and the medians of TTFT and decode, so two endpoints' runs can be set side by side.

    python3 benchmarks/h200_requests.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def describe(run: Path) -> list[str]:
    results = json.loads((run / "results.json").read_text())
    lines = [
        f"{run.name}: endpoint {results['setup'].get('endpoint')}, warnings "
        f"{sorted({w['code'] for w in results['warnings']}) or 'none'}"
    ]
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r.get("warmup")]
        asked = case.get("pp")
        served = sorted({r.get("prompt_tokens") for r in reqs}, key=lambda v: (v is None, v))
        exact = asked is not None and all(r.get("prompt_tokens") == asked for r in reqs)
        ttft = _median([r["metrics"]["ttft_s"] * 1000 for r in reqs if r["metrics"].get("ttft_s") is not None])
        decode = _median([r["metrics"]["decode_tps"] for r in reqs if r["metrics"].get("decode_tps") is not None])
        lines.append(
            f"  {case['label']}: n={len(reqs)} asked pp={asked} served={served} "
            f"{'EXACT' if exact else 'not exact'} lengths={case.get('prompt_lengths')} "
            f"ttft_ms={ttft and round(ttft, 1)} decode_tps={decode and round(decode, 1)}"
        )
    return lines


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("\n".join(describe(Path(arg))))
