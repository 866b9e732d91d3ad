"""Print the numbers that size the CI budget for the real-server tests.

    python tests/realserver/measure.py [--threads 1] [--parallel 4]

Model build time and size, server start time, cold prefill rate at ~512 and ~2,000 prompt
tokens (client TTFT and the server's own timings), repeat (cached) TTFT, decode rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


async def _stream(s, url, body):
    t0 = time.perf_counter()
    first = role = None
    last = None
    async with s.post(url, json={**body, "stream": True, "stream_options": {"include_usage": True}}) as r:
        async for raw in r.content:
            if not raw.startswith(b"data: ") or raw.startswith(b"data: [DONE]"):
                continue
            j = json.loads(raw[6:])
            last = j
            for ch in j.get("choices") or []:
                d = ch.get("delta", {})
                if role is None and d.get("role"):
                    role = time.perf_counter() - t0
                if first is None and (d.get("content") or ch.get("text")):
                    first = time.perf_counter() - t0
    return first, role, time.perf_counter() - t0, last


def _words(seed, n):
    rng = random.Random(seed)
    return " ".join(f"w{rng.randint(0, 99999)}" for _ in range(n))


async def run(srv, reps: int) -> dict:
    out: dict = {}
    conn = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=conn) as s:
        chat = srv.base_url + "/chat/completions"
        for target in (512, 2000):
            cold, warm, rate, role = [], [], [], []
            for _ in range(reps):
                text = _words(uuid.uuid4().hex, target)
                async with s.post(srv.root_url + "/tokenize", json={"content": text, "with_pieces": True}) as r:
                    toks = (await r.json())["tokens"]
                text = "".join(t["piece"] for t in toks[: target - 12])
                body = {
                    "model": srv.model,
                    "max_tokens": 4,
                    "ignore_eos": True,
                    "messages": [{"role": "user", "content": text}],
                }
                t_first, t_role, _, last = await _stream(s, chat, body)
                cold.append(t_first)
                role.append(t_role)
                rate.append(last["timings"]["prompt_per_second"])
                n = last["usage"]["prompt_tokens"]
                t_first, _, _, last2 = await _stream(s, chat, body)
                warm.append(t_first)
                assert last2["usage"]["prompt_tokens_details"]["cached_tokens"] == n - 1
            out[f"prompt_{target}"] = {
                "prompt_tokens": n,
                "cold_ttft_ms": round(1000 * statistics.median(cold), 1),
                "role_chunk_ms": round(1000 * statistics.median(role), 1),
                "server_prefill_tok_s": round(statistics.median(rate)),
                "client_prefill_tok_s": round(n / statistics.median(cold)),
                "repeat_ttft_ms": round(1000 * statistics.median(warm), 1),
            }
        for ctx_words, label in ((2, "decode_short_ctx"), (650, "decode_at_2k_ctx")):
            body = {
                "model": srv.model,
                "max_tokens": 256,
                "ignore_eos": True,
                "prompt": _words(uuid.uuid4().hex, ctx_words),
            }
            _, _, total, last = await _stream(s, srv.base_url + "/completions", body)
            out[label] = {
                "server_tok_s": round(last["timings"]["predicted_per_second"]),
                "prompt_tokens": last["usage"]["prompt_tokens"],
            }
        for conc in (1, 4):
            bodies = [
                {"model": srv.model, "max_tokens": 256, "ignore_eos": True, "prompt": _words(uuid.uuid4().hex, 50)}
                for _ in range(conc)
            ]
            t0 = time.perf_counter()
            await asyncio.gather(*[_stream(s, srv.base_url + "/completions", b) for b in bodies])
            out[f"aggregate_decode_conc{conc}_tok_s"] = round(conc * 256 / (time.perf_counter() - t0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    why = harness.missing_requirements()
    if why:
        print(why, file=sys.stderr)
        return 2
    tm = harness.load_tiny_model()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tiny.gguf"
        t0 = time.perf_counter()
        tm.build(path, force=True)
        report = {"model_build_s": round(time.perf_counter() - t0, 2), "model_bytes": path.stat().st_size}
        t0 = time.perf_counter()
        tm.build(path)
        report["model_cached_build_s"] = round(time.perf_counter() - t0, 3)
        with harness.start_server(path, d, parallel=args.parallel, threads=args.threads) as srv:
            report["server_start_s"] = round(srv.start_s, 3)
            report.update(asyncio.run(run(srv, args.reps)))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
