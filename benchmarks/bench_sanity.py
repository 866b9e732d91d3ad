"""Output sanity's client CPU per token (issue 55): what judging every answer costs the analysis.

The check runs in the analysis, once per measured answer, on the text requests.jsonl saved
(never on the hot path of a stream). This times SanityTally.add on answers of each kind:
the simulator's prose and its broken modes, and the real samples of tests/data/sanity (English,
code, JSON, CJK, other scripts), in CPU seconds of this process (time.process_time) per token
of the answer (o200k tokens: benchy's own count of the text). The one-off load of the o200k
vocabulary that the word check uses is timed apart.

    make bench-sanity    # or: .venv/bin/python benchmarks/bench_sanity.py [--answers N] [--tokens N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from benchy.measure.records import RequestRecord

from benchy.measure import tokenizer
from benchy.measure.sanity.tally import SanityTally
from benchy.sim import prose

SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "data" / "sanity"


def answers(kind: str, n: int, tokens: int) -> list[str]:
    if kind in prose.MODES:
        return ["".join(prose.texts(kind, tokens, seed)[0]) for seed in range(n)]
    blocks = (SAMPLES / f"{kind}.txt").read_text(encoding="utf-8").split("\n=====\n")
    return [blocks[i % len(blocks)] for i in range(n)]


def cpu_per_token(texts: list[str], repeat: int) -> tuple[float, float]:
    """Median and best CPU µs per o200k token over `repeat` passes of a fresh tally."""
    records = [
        RequestRecord("c", 0, i, False, f"r{i}", None, 64, 256, token_event_text=t, completion_tokens=256)
        for i, t in enumerate(texts)
    ]
    tokens = sum(tokenizer.count(t) for t in texts)
    runs = []
    for _ in range(repeat):
        tally = SanityTally()
        start = time.process_time()
        for rec in records:
            tally.add(rec)
        tally.result()
        runs.append((time.process_time() - start) / tokens * 1e6)
    return statistics.median(runs), min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=400, help="answers per kind")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per simulated answer")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    start = time.process_time()
    tokenizer.space_led_words()
    print(f"o200k vocabulary load (once per process): {(time.process_time() - start) * 1e3:.0f} ms CPU")
    print(f"{'answers':<10} {'µs/token (median)':>18} {'best':>8}")
    for kind in (*prose.MODES, "english", "code", "json", "cjk", "other"):
        median, best = cpu_per_token(answers(kind, args.answers, args.tokens), args.repeat)
        print(f"{kind:<10} {median:>18.2f} {best:>8.2f}")


if __name__ == "__main__":
    main()
