"""Trace files: a trace's requests (times, lengths, block ids) read from JSON Lines or CSV, before anything is sent.

The replay itself (load/replay.py) sends them at the trace's own times with its own lengths and block reuse.

Formats (JSON Lines, one request per line, detected per line):
  Mooncake (FAST'25)  {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}
                      one hash id per 512-token block of the prompt (the last may be partial);
                      equal ids mean identical blocks, and as the ids are prefix hashes an id
                      stands for its whole prefix
  plain               {"timestamp": ms, "input_length": n, "output_length": m} (or the keys
                      `input` / `output`): no block ids, so nothing is shared
CSV (a `.csv` file): Azure's LLM inference traces (TIMESTAMP, ContextTokens, GeneratedTokens)
and BurstGPT (Timestamp in s, Request tokens, Response tokens; rows of 0 output tokens, its
failed requests, are skipped): no block ids either.

Prompts are synthesised block by block (prompts.PromptFactory.blocks): equal ids give identical
token blocks, different ids never share a block, and the ids are salted per invocation so two
replays share nothing. Each record carries the reuse an ideal (unbounded) prefix cache would
give it, from the ids alone (`expected_reuse`), to set beside what the server reports.

Public traces: see docs/traces.md (Mooncake's FAST'25 traces, Azure LLM inference traces,
BurstGPT) and how to turn them into this format. benchy ships a small generated sample
(benchy/data/sample_trace.jsonl, `--trace sample`) so nothing is downloaded.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchy.jsontypes import JsonObject
from benchy.workloads import agent_trace
from benchy.workloads.spec import WorkloadError

if TYPE_CHECKING:
    from importlib.abc import Traversable

BLOCK_TOKENS = 512  # Mooncake's block size: one hash id per 512 prompt tokens
SAMPLE_NAME = "sample"
SAMPLE_FILE = "data/sample_trace.jsonl"


@dataclass(frozen=True)
class TraceRequest:
    offset_s: float  # send time from the trace's first request, at speed 1
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None  # None: a plain trace, every block unique

    def block_ids(self, index: int) -> tuple[object, ...]:
        """The ids of this request's blocks; a plain trace's are its own (never shared)."""
        if self.hash_ids is not None:
            return self.hash_ids
        return tuple(("req", index, b) for b in range(math.ceil(self.input_tokens / BLOCK_TOKENS)))


def trace_path(name: str) -> Path | Traversable:
    """`sample` names the shipped sample; anything else is a file."""
    if name == SAMPLE_NAME:
        return resources.files("benchy").joinpath(SAMPLE_FILE)
    return Path(name)


def load(name: str, limit: int | None = None) -> list[TraceRequest]:
    """A request trace's requests in time order; one-line errors naming file and line. An agent
    trace states no lengths: load/agent_lengths.py counts them from its text."""
    if agent_trace.is_agent_trace(name):
        raise WorkloadError(f"trace {name} is an agent trace: its lengths are counted by the load stage")
    path = trace_path(name)
    text = agent_trace.read_path(name, path)
    rows = []
    parse = _csv_rows(name, text) if name.lower().endswith(".csv") else _jsonl_rows(name, text)
    for row in parse:
        rows.append(row)
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise WorkloadError(f"trace {name} holds no requests")
    rows.sort(key=lambda r: r[0])
    start = rows[0][0]
    return [TraceRequest((t - start) / 1000.0, n, m, ids) for t, n, m, ids in rows]


Row = tuple[float, int, int, tuple[int, ...] | None]  # (timestamp ms, input tokens, output tokens, block ids)


def _jsonl_rows(name: str, text: str) -> Iterator[Row]:
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield _row(name, number, line)


# CSV traces (no block ids): Azure's LLM inference traces and BurstGPT, by their own columns.
_CSV_COLUMNS = (
    ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),  # Azure LLM inference trace 2023/2024
    ("Timestamp", "Request tokens", "Response tokens"),  # BurstGPT (timestamp in seconds)
)


def _csv_rows(name: str, text: str) -> Iterator[Row]:
    """Azure's (TIMESTAMP as a date-time) or BurstGPT's (Timestamp in s) CSV. A row with 0
    output tokens is a request that failed in the trace (BurstGPT keeps those): skipped."""
    reader = csv.DictReader(io.StringIO(text))
    columns = next((c for c in _CSV_COLUMNS if set(c) <= set(reader.fieldnames or ())), None)
    if columns is None:
        known = "; ".join(", ".join(c) for c in _CSV_COLUMNS)
        raise WorkloadError(f"trace {name}: a CSV trace needs the columns of one of: {known}")
    when, tokens_in, tokens_out = columns
    for number, row in enumerate(reader, 2):
        where = f"trace {name}:{number}"
        try:
            n, m = int(row[tokens_in]), int(row[tokens_out])
            t = _csv_time_ms(row[when])
        except (TypeError, ValueError):
            raise WorkloadError(f"{where}: expected a time and two token counts, got {dict(row)!r}") from None
        if n >= 1 and m >= 1:
            yield t, n, m, None


def _csv_time_ms(text: str) -> float:
    """Seconds (BurstGPT) or an ISO date-time with up to 7 decimals (Azure) → ms."""
    try:
        return float(text) * 1000
    except ValueError:
        head, _, fraction = text.strip().partition(".")
        moment = dt.datetime.fromisoformat(head).replace(tzinfo=dt.timezone.utc)
        return moment.timestamp() * 1000 + (float("0." + fraction) * 1000 if fraction else 0.0)


def _row(name: str, number: int, line: str) -> Row:
    where = f"trace {name}:{number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a JSON object per line")
    timestamp = obj.get("timestamp")
    if not isinstance(timestamp, (int, float)) or not _number(timestamp) or timestamp < 0:
        raise WorkloadError(f"{where}: timestamp must be a number of milliseconds ≥ 0, got {timestamp!r}")
    n = _length(where, obj, "input_length", "input")
    m = _length(where, obj, "output_length", "output")
    ids = obj.get("hash_ids")
    if ids is None:
        return float(timestamp), n, m, None
    if not isinstance(ids, list) or not all(isinstance(i, (int, str)) and not isinstance(i, bool) for i in ids):
        raise WorkloadError(f"{where}: hash_ids must be a list of integers")
    if len(ids) != math.ceil(n / BLOCK_TOKENS):
        raise WorkloadError(
            f"{where}: {len(ids)} hash_ids for {n} input tokens; Mooncake gives one per "
            f"{BLOCK_TOKENS}-token block ({math.ceil(n / BLOCK_TOKENS)})"
        )
    return float(timestamp), n, m, tuple(ids)


def _length(where: str, obj: JsonObject, key: str, alias: str) -> int:
    value = obj.get(key, obj.get(alias))
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise WorkloadError(f"{where}: {key} must be a whole number ≥ 1, got {value!r}")
    return value


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def expected_reuse(requests: list[TraceRequest], order: Sequence[int] | None = None) -> list[int]:
    """Prompt tokens an unbounded prefix cache would serve each request, in send order: the
    leading blocks whose whole prefix an earlier request already sent (a partial last block
    counts as far as both go), never the whole prompt (its last token is always computed).
    `order`: the requests' indices in the order the server got them, where that is known (two
    requests due close together can reach it swapped); the trace's order by default."""
    seen: dict[int, int] = {}  # prefix of ids (chained hash) → the most tokens of its last block sent
    out = [0] * len(requests)
    for index in range(len(requests)) if order is None else order:
        req = requests[index]
        ids = req.block_ids(index)
        reuse, reusing, prefix = 0, True, 0
        for b, block_id in enumerate(ids):
            length = min(BLOCK_TOKENS, req.input_tokens - b * BLOCK_TOKENS)
            prefix = hash((prefix, block_id))
            if reusing:
                had = seen.get(prefix, 0)
                reuse += min(had, length)
                reusing = had >= length
            seen[prefix] = max(seen.get(prefix, 0), length)
        out[index] = min(reuse, req.input_tokens - 1)
    return out


def shareable(requests: list[TraceRequest]) -> list[int]:
    """Prompt tokens each request could take from a cache holding every other request of the
    trace, whatever their order: the leading blocks whose whole prefix some other request has
    (a partial last block as far as both go), never the whole prompt. A cached count above this
    is leakage in any order; above `expected_reuse` alone it may be two requests that reached
    the server swapped (due close together, sent on two connections)."""
    holders: dict[int, dict[int, int]] = {}  # prefix of ids (chained hash) → request → its tokens of the last block
    chains = []
    for index, req in enumerate(requests):
        chain, prefix = [], 0
        for b, block_id in enumerate(req.block_ids(index)):
            prefix = hash((prefix, block_id))
            length = min(BLOCK_TOKENS, req.input_tokens - b * BLOCK_TOKENS)
            chain.append((prefix, length))
            holders.setdefault(prefix, {})[index] = length
        chains.append(chain)
    out = []
    for index, chain in enumerate(chains):
        reuse = 0
        for prefix, length in chain:
            other = max((n for i, n in holders[prefix].items() if i != index), default=0)
            reuse += min(other, length)
            if other < length:
                break
        out.append(min(reuse, requests[index].input_tokens - 1))
    return out


def summary(requests: list[TraceRequest]) -> JsonObject:
    """What the trace asks for, before anything is sent."""
    reuse = expected_reuse(requests)
    total_in = sum(r.input_tokens for r in requests)
    return {
        "requests": len(requests),
        "span_s": requests[-1].offset_s,
        "input_tokens": total_in,
        "output_tokens": sum(r.output_tokens for r in requests),
        "expected_reused_tokens": sum(reuse),
        "expected_hit_rate": sum(reuse) / total_in if total_in else None,
        "block_ids": all(r.hash_ids is not None for r in requests),
    }


# ------------------------------------------------------------------ the shipped sample


def generate_sample(seed: int = 18) -> list[JsonObject]:
    """The shipped sample: 40 Mooncake-format requests over about 12 s, small enough for a
    simulator or a laptop model. Three system prompts (1-2 blocks) shared across sessions;
    sessions of 2-4 turns whose prompts extend the previous turn's full blocks (its partial
    last block becomes a new, full one, as Mooncake's hashes of block content do); a few
    one-off requests. Deterministic: tests compare the shipped file with this output."""
    rng = np.random.default_rng(seed)
    next_id = iter(range(1, 1_000_000))
    systems = [[next(next_id) for _ in range(k)] for k in (1, 2, 1)]
    rows: list[JsonObject] = []
    t = 0.0
    for _ in range(12):  # sessions
        ids = list(systems[int(rng.integers(len(systems)))]) + [0]
        for _turn in range(int(rng.integers(2, 5))):
            ids = ids[:-1] + [next(next_id) for _ in range(int(rng.integers(2, 4)))]
            tail = int(rng.integers(64, BLOCK_TOKENS))  # the last block is partial
            rows.append(_sample_row(t, ids, tail, int(rng.integers(16, 96))))
            t += float(rng.exponential(0.3))
        if len(rows) >= 34:
            break
    while len(rows) < 40:  # one-off requests: nothing shared
        ids = [next(next_id) for _ in range(int(rng.integers(1, 4)))]
        rows.append(_sample_row(t, ids, int(rng.integers(64, BLOCK_TOKENS)), int(rng.integers(16, 96))))
        t += float(rng.exponential(0.3))
    return rows


def _sample_row(t_s: float, ids: list[int], tail: int, output: int) -> JsonObject:
    return {
        "timestamp": round(t_s * 1000),
        "input_length": (len(ids) - 1) * BLOCK_TOKENS + tail,
        "output_length": output,
        "hash_ids": list(ids),
    }


def sample_text(rows: list[JsonObject]) -> str:
    return "".join(json.dumps(row, separators=(", ", ": ")) + "\n" for row in rows)
