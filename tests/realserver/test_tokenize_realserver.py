"""Issue 23: llama.cpp's own /tokenize as a token-count witness, against the real server.

benchy asks the server's /tokenize after each case (load/tokenize.py) for disputed requests
and a small sample of the rest. Here the server is llama.cpp (xllamacpp) on a random-weight
tiny model, whose generated tokens need not be what its tokenizer makes of their text again:
the witness is asked, recorded as the server said it, and usage (backed by timings.predicted_n
and the events) stays the count.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from benchy.load.tokenize import TOKENIZE_SAMPLE_PER_CASE
from benchy.measure import evidence
from benchy.records import WITNESS_OF
from benchy.records.plan import PLAN_OF
from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver


def run_results(server, out, *args: str) -> dict:
    proc = run_benchy("run", "--base-url", server.base_url, "--quiet", "--output", str(out), *args)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr
    return json.loads((out / "results.json").read_text())


def tokens_of(server, text: str) -> int:
    """llama.cpp's /tokenize of `text`, asked here directly."""
    body = json.dumps({"content": text, "add_special": False}).encode()
    req = urllib.request.Request(server.root_url + "/tokenize", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return len(json.loads(r.read())["tokens"])


def measured(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"]]


def test_llama_cpp_tokenizes_the_streamed_text_after_the_case(llama_server, tmp_path):
    results = run_results(llama_server, tmp_path, "--pp", "128", "--tg", "32", "--runs", "4")
    (case,) = results["cases"]
    lines = (tmp_path / "requests.jsonl").read_text().splitlines()[1:]
    records = [
        json.loads(line) for line in lines if WITNESS_OF not in line and PLAN_OF not in line
    ]  # not /tokenize's, not tags
    text = {r["request_id"]: r["token_event_text"] for r in records}
    asked = [r for r in measured(case) if r["token_count"]["server_tokenize"] is not None]
    assert len(asked) >= TOKENIZE_SAMPLE_PER_CASE  # llama.cpp answers /tokenize
    for r in asked:
        # What benchy recorded is the server's own count of the text it streamed.
        assert r["token_count"]["server_tokenize"] == tokens_of(llama_server, text[r["request_id"]])
    for r in measured(case):
        count = r["token_count"]
        assert count["tokens"] == count["usage"] == r["server_timings"]["predicted_n"] == 32
        assert count["source"] == evidence.USAGE and count["mismatch"] is None
    assert "usage_mismatch" not in {w["code"] for w in results["warnings"]}
    print(
        "\n[realserver] usage 32, server /tokenize of the streamed text: "
        f"{sorted(r['token_count']['server_tokenize'] for r in asked)}"
    )
