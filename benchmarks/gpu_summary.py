"""The GPU figures of a run beside its decode rate and the bandwidth the rate implies (issue 28).

For each case of results.json: decode t/s (median), the decode ceiling and the bandwidth the
measured rate implies (decode t/s × (weight + KV bytes per token), single stream only), the
GPUs' measured bandwidth (DRAM activity × peak), average power, J/token and marginal J/token
(above the idle baseline). With an nvidia-smi CSV (timestamp, power.draw, utilization.gpu,
utilization.memory) sampled beside the run, its idle and busy draw as an independent witness.

    python benchmarks/gpu_summary.py RUN/results.json [nvidia_smi.csv]
"""

from __future__ import annotations

import csv
import json
import statistics
import sys


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def implied_gbs(case: dict) -> float | None:
    """GB/s one stream's decode rate implies: rate × bytes read per token (ceiling's figures)."""
    ceiling, decode = case.get("ceiling"), (case["summary"].get("decode_tps") or {}).get("median")
    if not ceiling or decode is None or case["concurrency"] != 1:
        return None
    per_token = (ceiling.get("weight_bytes_per_token") or 0) + (ceiling.get("kv_bytes_per_token") or 0)
    return decode * per_token / 1e9 if per_token else None


def rows(results: dict) -> list[list[str]]:
    out = []
    for case in results["cases"]:
        gpu = case.get("gpu") or {}
        decode = (case["summary"].get("decode_tps") or {}).get("median")
        ceiling = case.get("ceiling") or {}
        pct = gpu.get("bandwidth_pct")
        measured = _fmt(gpu.get("bandwidth_gbs"), ",.0f") + ("" if pct is None else f" ({pct:.0f}%)")
        out.append(
            [
                case["label"],
                _fmt(decode, ".1f"),
                _fmt(ceiling.get("tokens_per_s"), ".1f"),
                _fmt(ceiling.get("decode_pct"), ".0f"),
                _fmt(implied_gbs(case), ",.0f"),
                measured,
                _fmt(gpu.get("power_w"), ",.0f"),
                _fmt(gpu.get("util_pct"), ".0f"),
                _fmt(gpu.get("joules_per_token"), ".3g"),
                _fmt(gpu.get("marginal_joules_per_token"), ".3g"),
                "; ".join(f"{k}: {v}" for k, v in (gpu.get("unavailable") or {}).items()) or "",
            ]
        )
    return out


HEAD = [
    "case",
    "decode t/s",
    "ceiling t/s",
    "decode % of ceiling",
    "implied GB/s",
    "measured GB/s (% of peak)",
    "GPU W",
    "util %",
    "J/token",
    "marginal J/token",
    "unavailable",
]


def smi_lines(path: str) -> list[str]:
    """nvidia-smi's own draw: the mean of samples at ≤ 5% utilization (idle) and at ≥ 50% (busy)."""
    idle, busy = [], []
    with open(path, encoding="utf-8") as f:
        for row in csv.reader(f):
            try:
                watts, util = float(row[1]), float(row[2])
            except (IndexError, ValueError):
                continue
            (idle if util <= 5 else busy if util >= 50 else []).append(watts)
    mean = lambda v: f"{statistics.mean(v):,.0f} W over {len(v)} samples" if v else "no samples"  # noqa: E731
    return [f"nvidia-smi idle (util ≤ 5%): {mean(idle)}", f"nvidia-smi busy (util ≥ 50%): {mean(busy)}"]


def main(argv: list[str]) -> None:
    results = json.load(open(argv[0], encoding="utf-8"))
    gpu = results["setup"].get("gpu") or {}
    baseline = gpu.get("baseline") or {}
    print(f"GPUs: {gpu.get('gpus')} via {gpu.get('source')}; peak {gpu.get('peak_bandwidth_gbs')} GB/s "
          f"({gpu.get('peak_source')}); idle baseline {_fmt(baseline.get('power_w'), ',.0f')} W")  # fmt: skip
    print(f"missing fields: {gpu.get('missing') or 'none'}; bandwidth basis: {gpu.get('bandwidth_basis')}")
    print("| " + " | ".join(HEAD) + " |")
    print("|" + "---|" * len(HEAD))
    for row in rows(results):
        print("| " + " | ".join(row) + " |")
    if len(argv) > 1:
        print("\n".join(smi_lines(argv[1])))


if __name__ == "__main__":
    main(sys.argv[1:])
