"""Print how benchy's figures on one llama.cpp server compare across --endpoint chat, responses
and messages: paired, request by request, so that a busy machine's drift hits all three alike.

    python tests/realserver/measure_apis.py [--rounds 30] [--pp-words 400] [--tg 128] [--base-url URL]

Without --base-url it starts the realserver suite's server (xllamacpp, tiny model). Each round
sends one fresh prompt (a new nonce first) to each endpoint in turn, in a rotating order; each
request's TTFT and decode rate are benchy's own (measure.metrics), and the server's prompt_ms
and predicted_per_second (chat and Responses carry llama.cpp's timings) are the witness.
Printed: per endpoint the median TTFT, decode rate and TTFT − prompt_ms; per API against chat
the median of the paired differences (TTFT, ms) and ratios (decode), and the same of the
server's own timings where both carry them (what of a difference is the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchy.client.client import Client  # noqa: E402
from benchy.client.settings import ClientSettings  # noqa: E402
from benchy.measure import registry  # noqa: E402
from benchy.records import RequestRecord  # noqa: E402

ENDPOINTS = ("chat", "responses", "messages")


async def measure(base_url: str, model: str | None, rounds: int, words: int, tg: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {e: [] for e in ENDPOINTS}
    async with Client(ClientSettings(base_url=base_url, model=model)) as client:
        await client.choose_model()
        for i in range(rounds + 1):  # the first round warms up, not counted
            order = ENDPOINTS[i % 3 :] + ENDPOINTS[: i % 3]
            for endpoint in order:
                text = uuid.uuid4().hex + " " + " ".join(f"w{(i * 7919 + k) % 99991}" for k in range(words))
                rec = RequestRecord("c", 0, i, False, f"m{i}{endpoint}", None, 0, tg)
                rec = await client.stream(rec, text, tg, endpoint, {"ignore_eos": True})
                if i == 0 or not rec.ok:
                    continue
                values = registry.request_metrics(rec, False)
                timings = rec.server_timings or {}
                out[endpoint].append(
                    {
                        "round": i,
                        "ttft": values["ttft_s"],
                        "decode": values["decode_tps"],
                        "prompt_s": timings["prompt_ms"] / 1000 if "prompt_ms" in timings else None,
                        "server_decode": timings.get("predicted_per_second"),
                    }
                )
    return out


def report(out: dict[str, list[dict]]) -> None:
    def med(values):
        values = [v for v in values if isinstance(v, float)]
        return statistics.median(values) if values else float("nan")

    for endpoint, rows in out.items():
        gaps = [r["ttft"] - r["prompt_s"] for r in rows if r["prompt_s"] is not None]
        print(
            f"{endpoint:9s} n={len(rows)} TTFT {1000 * med(r['ttft'] for r in rows):.1f} ms, decode "
            f"{med(r['decode'] for r in rows):.0f} t/s, TTFT - prompt_ms {1000 * med(gaps):.1f} ms"
        )
    chat = {r["round"]: r for r in out["chat"]}
    for endpoint in ENDPOINTS[1:]:
        pairs = [(chat[r["round"]], r) for r in out[endpoint] if r["round"] in chat]
        ttft = med([b["ttft"] - a["ttft"] for a, b in pairs])
        decode = med([b["decode"] / a["decode"] for a, b in pairs])
        print(
            f"{endpoint} - chat, paired over {len(pairs)} rounds: TTFT {1000 * ttft:+.1f} ms "
            f"(target within 5 ms + 2%), decode x{decode:.3f} (target within 2%)"
        )
        witnessed = [(a, b) for a, b in pairs if a["prompt_s"] is not None and b["prompt_s"] is not None]
        if witnessed:  # the server's own clock, the same pairs: what of the difference is the server's
            prompt = med([b["prompt_s"] - a["prompt_s"] for a, b in witnessed])
            rate = med([b["server_decode"] / a["server_decode"] for a, b in witnessed])
            print(f"  the server's own timings, same pairs: prompt_ms {1000 * prompt:+.1f} ms, decode x{rate:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--pp-words", type=int, default=400)
    parser.add_argument("--tg", type=int, default=128)
    parser.add_argument("--base-url")
    args = parser.parse_args()
    if args.base_url:
        report(asyncio.run(measure(args.base_url, None, args.rounds, args.pp_words, args.tg)))
        return
    import harness

    model = harness.load_tiny_model().build(Path(tempfile.gettempdir()) / "benchy-tiny-llama.gguf")
    with harness.start_server(model, Path(tempfile.mkdtemp())) as srv:
        report(asyncio.run(measure(srv.base_url, srv.model, args.rounds, args.pp_words, args.tg)))


if __name__ == "__main__":
    main()
