"""One capacity folder in a few lines, for a device log: the answer, the probes it took, each point.

python benchmarks/capacity_summary.py DIR     (DIR holds capacity.json)
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchy.results.capacity import read


def main(folder: str) -> None:
    result = read(Path(folder))
    rounds = [r for p in result.points for r in p.rounds]
    print(f"{folder}: {result.answer.line if result.answer else 'no answer'}")
    print(
        f"  probes: {len(result.points)} loads, {len(rounds)} rounds, "
        f"{sum(r.requests for r in rounds)} requests ({sum(not r.counted for r in rounds)} rounds not counted)"
    )
    for p in result.points:
        ttft = p.ttft.p90 * 1000 if p.ttft and p.ttft.p90 is not None else float("nan")
        itl = p.itl.median * 1000 if p.itl else float("nan")
        hit = f" hit {p.cache_hit:.0%}" if p.cache_hit is not None else ""
        print(
            f"  {p.label}: {p.good}/{p.requests} {p.verdict}{'' if p.clear else ' (uncertain)'}  "
            f"TTFT p90 {ttft:.0f} ms  ITL p50 {itl:.1f} ms  {p.throughput_tps or 0:.0f} tok/s  "
            f"{p.per_user_tps or 0:.1f} tok/s/user{hit}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
