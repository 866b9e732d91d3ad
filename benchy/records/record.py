"""The exchange record: one request as benchy asked it and as the client saw it answered.

Apart from records/__init__.py (its file, reader and writer) so that records/plan.py, the
plan's tags that a row joins with it, sits beside it with no import round a circle.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any

from benchy.jsontypes import described


# Frozen: made once, by the client when the answer closes (client/draft.py) or by the plan, and
# never written into after; slotted: no __dict__ per record (a long run holds one row per request).
@dataclass(frozen=True, slots=True)
class RequestRecord:
    case: str
    run: int
    index: int
    warmup: bool
    request_id: str
    nonce: str | None
    target_prompt_tokens: int
    target_output_tokens: int
    sent_mono_s: float = 0.0
    sent_unix_s: float = 0.0
    status: str = "ok"  # "ok" | "error"
    error_kind: str | None = None  # e.g. http_500, timeout, reset, disconnect, stall (client.py lists all)
    error: str | None = None
    # "kind: message" of a first attempt that failed on a reused keep-alive connection before
    # any response byte; the request was sent again on a fresh one (timestamps are the retry's).
    retried: str | None = None
    retried_kind: str | None = None  # (1.2) that first failure's error kind, apart from its message
    http_status: int | None = None
    headers_s: float | None = None  # response headers received
    first_chunk_s: float | None = None  # first SSE event of any kind (a role-only chunk counts)
    end_s: float | None = None  # stream finished (or failed)
    token_event_s: list[float] = field(default_factory=list)  # events that carried text
    token_event_chars: list[int] = field(default_factory=list)
    token_event_kinds: str = ""  # CONTENT / REASONING / TOOL per token-bearing event
    # The generated text as it streamed, reasoning and content in event order (token_event_chars
    # cuts it per event): metrics count it with benchy's own tokenizer (evidence.py).
    token_event_text: str = ""
    # vLLM's stream_options.continuous_usage_stats: the cumulative completion_tokens that came
    # with each token-bearing event; empty when the server sends no per-chunk usage.
    token_event_usage: list[int] = field(default_factory=list)
    sse_events: int = 0  # every data event, token-bearing or not
    prompt_tokens: int | None = None  # from the server's usage
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    usage_reported: bool = False
    content_chars: int = 0
    reasoning_chars: int = 0
    content_null_events: int = 0  # deltas that said content: null with no other text
    # (1.8) Tool calls are output: the characters of their names and arguments as they came
    # (also in token_event_text, kind TOOL), and how many calls the answer held (parallel calls).
    tool_chars: int = 0
    tool_calls: int = 0
    finish_reason: str | None = None
    # Anomaly codes (files before requests 1.2 wrote a count after the code: malformed_events:N)
    anomalies: list[str] = field(default_factory=list)
    anomaly_counts: dict[str, int] = field(default_factory=dict)  # (1.2) code → its count, where one goes
    server_timings: dict[str, Any] | None = None  # llama.cpp's per-response `timings`, verbatim
    # The server's own token count of token_event_text (its /tokenize), asked after the case
    # for a request whose count was disputed, or a few to corroborate (load/tokenize.py); None:
    # not asked, or the server has no /tokenize. The record is written as it finishes, before
    # this is asked: requests.jsonl gets it later, on a witness line of its own (witness_line).
    server_tokenize: int | None = None
    # (1.8) --tokenizer's count of token_event_text (the model's own vocabulary, offline),
    # counted after the case for every answer (load/tokenize.py); a late witness as above.
    tokenizer_tokens: int | None = None
    # (1.3) False: sent with --no-stream, the answer read whole (client/whole.py); its one text
    # event is the answer's end, so no stream-timing figure is taken from it (metrics.py).
    streamed: bool = True
    # (1.26) A pooling request (--endpoint embeddings): how many inputs it embedded (None: a
    # generation request). It generates no token, so no output figure is taken from it.
    inputs: int | None = described("(1.26) --endpoint embeddings: the inputs the request embedded", omit=True)
    # (1.27) --images: the server's own count of the images' tokens where its usage gives one
    # (prompt_tokens_details.image_tokens); None: no image, or no such count. (The images sent
    # are the plan's: records.plan.RequestTags.)
    server_image_tokens: int | None = described(
        "(1.27) usage.prompt_tokens_details.image_tokens: the server's own count of the images' tokens", omit=True
    )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it copies each list element through its recursion, 1-2 ms for
        # a 256-token record, more CPU than streaming it took. Fields hold scalars, flat lists
        # and one JSON object (server_timings).
        out = {}
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if value.__class__ is list:
                value = list(value)
            elif value.__class__ is dict:
                value = copy.deepcopy(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_FIELD_NAMES = tuple(
    f.name for f in fields(RequestRecord) if f.name not in ("server_tokenize", "tokenizer_tokens")
)  # see the fields
