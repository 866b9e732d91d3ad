"""The simulator's words: every SSE event and whole body of a response, encoded before it streams."""

from __future__ import annotations

import itertools
import json

from benchy.jsontypes import JsonObject
from benchy.sim import tools, vocab
from benchy.sim.apis import APIS, renderer_class
from benchy.sim.config import SimConfig
from benchy.sim.engine import CONTENT, MARKER, REASONING
from benchy.sim.request import Job

DONE = b"data: [DONE]\n\n"


def event_sizes(n: int, cfg: SimConfig, steps: list[int] | None = None) -> list[int]:
    """Tokens per SSE event: K at a time, or all n split into E near-equal events; under
    speculative decoding one event per step (vLLM) or per token (llama.cpp)."""
    if steps is not None:
        return list(steps) if cfg.spec_style == "vllm" else [1] * n
    if cfg.events_per_response:
        parts = min(cfg.events_per_response, n)
        base, extra = divmod(n, parts) if parts else (0, 0)
        return [base + (1 if i < extra else 0) for i in range(parts)]
    if cfg.stream_interval and n:  # the first token alone when prefill ends, then N a step's interval
        k = cfg.stream_interval
        return [1, *(min(k, n - start) for start in range(1, n, k))]
    k = cfg.tokens_per_event
    return [min(k, n - start) for start in range(0, n, k)]


def event_groups(n: int, reasoning: int, cfg: SimConfig, steps: list[int] | None = None) -> list[tuple[str, int]]:
    """(kind, tokens) per token event; one straddling the reasoning/content boundary splits."""
    groups, pos = [], 0
    for size in event_sizes(n, cfg, steps):
        end = pos + size
        if pos < reasoning < end:
            groups += [("reasoning", reasoning - pos), ("content", end - reasoning)]
        else:
            groups.append(("reasoning" if end <= reasoning else "content", size))
        pos = end
    return groups or [("content", 0)]  # nothing generated: one event carries finish_reason


def reasoning_fields(field: str) -> tuple[str, ...]:
    """The delta or message keys that carry reasoning text (--reasoning-field both: vLLM around
    the reasoning_content -> reasoning rename, the same text in each)."""
    return ("reasoning_content", "reasoning") if field == "both" else (field,)


TOOL = "tool"  # a tool call's tokens: its name (the call's first event), then its arguments


def tool_groups(job: Job, cfg: SimConfig) -> list[tuple[str, int]]:
    """(kind, tokens) per event of an answer of tool calls (sim/tools.py): the reasoning's
    events, then per call its name whole, then its arguments K tokens an event, or all in one
    event once the call is whole (--tool-parser-buffer)."""
    assert job.tools is not None
    groups = event_groups(job.reasoning, job.reasoning, cfg) if job.reasoning else []
    for start, args, end in job.tools.spans:
        if args > start:
            groups.append((TOOL, args - start))
        if end > args:
            sizes = [end - args] if cfg.tool_parser_buffer else event_sizes(end - args, cfg)
            groups += [(TOOL, k) for k in sizes]
    return groups


SILENT = "silent"  # tokens that make no event (an end-of-sequence token): usage counts them
TEXTLESS = "textless"  # a first token whose text is held (a split character): a role chunk only


def silence_last(groups: list[tuple[str, int]], silent: int) -> list[tuple[str, int]]:
    """The last `silent` tokens split off into one group that sends no text (--silent-tokens);
    the tokens before them keep their events."""
    total = sum(n for _, n in groups)
    silent = min(silent, total - 1) if total > 1 else 0
    if silent <= 0:
        return groups
    out, left = list(groups), silent
    while left:
        kind, n = out.pop()
        if n > left:
            out.append((kind, n - left))
            break
        left -= n
    return [*out, (SILENT, silent)]


def _without_first_token(groups: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The event groups after the first token went out as a textless role chunk."""
    (kind, n), rest = groups[0], groups[1:]
    return [(kind, n - 1), *rest] if n > 1 else rest


def harmony_groups(kinds: list[str], cfg: SimConfig, split: bool) -> list[tuple[str, int]]:
    """(kind, tokens) per SSE group of a --harmony output; `split` (chat) cuts each group where
    the channel changes, otherwise a group is named by its most telling token."""
    groups, pos = [], 0
    for size in event_sizes(len(kinds), cfg):
        chunk = kinds[pos : pos + size]
        pos += size
        if split:
            groups += [(kind, len(list(run))) for kind, run in itertools.groupby(chunk)]
        else:
            groups.append((next((k for k in (CONTENT, REASONING) if k in chunk), MARKER), size))
    return groups or [(CONTENT, 0)]


def usage(job: Job, cached: int | None, completion: int, reasoning: int) -> JsonObject:
    """The usage object; completion_tokens is what the server claims (see --usage-scale);
    cached None: no prompt_tokens_details (vLLM without --enable-prompt-tokens-details)."""
    prompt = len(job.prompt_ids)
    out: dict[str, object] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    if job.image_tokens is not None:
        # vLLM's shape (0.32): the image tokens under multimodal_tokens, by modality
        counted = {"multimodal_tokens": {"image": job.image_tokens}}
        out["prompt_tokens_details"] = {**(out.get("prompt_tokens_details") or {}), **counted}  # type: ignore[dict-item]
    out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


class Renderer:
    """Pre-encodes every SSE event of a response, so streaming is little more than writes."""

    def __init__(
        self,
        job: Job,
        null_content: bool,
        role_in_first: bool,
        usage_scale: float = 1.0,
        reasoning_field: str = "reasoning_content",
    ):
        self.job = job
        self.reasoning_field = reasoning_field
        self.usage_scale = usage_scale
        self.null_content = null_content
        self.role_in_first = role_in_first
        obj = "chat.completion.chunk" if job.endpoint == "chat" else "text_completion"
        self._head = (
            f'data: {{"id":"{job.response_id}","object":"{obj}","created":{job.created},'
            f'"model":{json.dumps(job.model)},"choices":[{{"index":0,'
        )

    def token_events(self, cfg: SimConfig) -> list[tuple[str, int, bytes | None]]:
        """(kind, tokens, event); event None: tokens generated with nothing to send (--harmony)."""
        if self.job.plan.kinds is not None:
            return self._harmony_events(cfg)
        job, texts, pos = self.job, self.job.plan.texts, 0
        planned = tool_groups(job, cfg) if job.tools else event_groups(job.plan.n, job.reasoning, cfg, job.steps)
        groups = silence_last(planned, cfg.silent_tokens)
        events: list[tuple[str, int, bytes | None]] = []
        textless = cfg.textless_first and job.plan.n > 1 and not job.tools
        if textless:
            events.append((TEXTLESS, 1, self.role_event()))
            groups, pos = _without_first_token(groups), 1
        for i, (kind, tokens) in enumerate(groups):
            start = 0 if textless and i == 0 else pos  # the held first token's text comes now
            text = "" if kind == SILENT else "".join(texts[start : pos + tokens])
            finish = job.plan.finish_reason if i == len(groups) - 1 else None
            with_role = i == 0 and not textless
            if kind == TOOL:
                assert job.tools is not None
                call = job.tools.call_at(pos)
                opens = pos == job.tools.spans[call][0]
                events.append((kind, tokens, self._tool_event(call, text, opens, with_role, finish)))
                pos += tokens
                continue
            pos += tokens
            events.append((kind, tokens, self._token_event(kind, text, with_role, finish, pos)))
        return events

    def _tool_event(self, call: int, text: str, opens: bool, first: bool, finish: str | None) -> bytes:
        """A chat delta of tool call `call`: as it opens, its id and name (arguments ""); then a
        fragment of its arguments."""
        assert self.job.tools is not None
        if opens:
            fn = {"name": text, "arguments": ""}
            entry = {"index": call, "id": tools.call_id(call), "type": "function", "function": fn}
        else:
            entry = {"index": call, "function": {"arguments": text}}
        delta: JsonObject = {"role": "assistant"} if first and self.role_in_first else {}
        delta["tool_calls"] = [entry]
        tail = f',"logprobs":null,"finish_reason":{json.dumps(finish)}}}]}}\n\n'
        return f'{self._head}"delta":{json.dumps(delta)}{tail}'.encode()

    def _harmony_events(self, cfg: SimConfig) -> list[tuple[str, int, bytes | None]]:
        job, pos, first = self.job, 0, True
        events: list[tuple[str, int, bytes | None]] = []
        assert job.plan.kinds is not None  # a --harmony plan
        groups = harmony_groups(job.plan.kinds, cfg, split=job.endpoint == "chat")
        for i, (kind, tokens) in enumerate(groups):
            text = "".join(self._visible(pos, pos + tokens))
            pos += tokens
            last = i == len(groups) - 1
            if not text and not last:
                events.append((kind, tokens, None))
                continue
            finish = job.plan.finish_reason if last else None
            events.append((kind, tokens, self._token_event(kind, text, first, finish, pos)))
            first = False
        return events

    def _visible(self, start: int, end: int) -> list[str]:
        """What a --harmony server shows of these tokens: chat parses the channels away, and
        completions drop special tokens (not the header words) when skip_special_tokens."""
        plan = self.job.plan
        texts, kinds = plan.texts[start:end], (plan.kinds or [])[start:end]
        if self.job.endpoint == "chat":
            return [text for text, kind in zip(texts, kinds) if kind != MARKER]
        if self.job.skip_special_tokens:
            return [text for text in texts if text not in vocab.SPECIAL]
        return texts

    def _harmony_whole(self) -> tuple[str, str]:
        """(reasoning_content, content) of a whole --harmony response."""
        plan = self.job.plan
        if self.job.endpoint != "chat":
            return "", "".join(self._visible(0, plan.n))
        by_kind = {
            kind: "".join(t for t, k in zip(plan.texts, plan.kinds or []) if k == kind) for kind in (REASONING, CONTENT)
        }
        return by_kind[REASONING], by_kind[CONTENT]

    def claimed(self, tokens: int) -> int:
        """What usage says of `tokens` generated tokens (--usage-scale: a miscounting backend)."""
        return round(tokens * self.usage_scale)

    def _token_event(self, kind: str, text: str, first: bool, finish: str | None, done: int = 0) -> bytes:
        value = "null" if self.null_content and kind == "content" else json.dumps(text)
        tail = f',"logprobs":null,"finish_reason":{json.dumps(finish)}}}]}}\n\n'
        if self.job.continuous_usage:  # vLLM's continuous_usage_stats: cumulative counts per chunk
            prompt, completion = len(self.job.prompt_ids), self.claimed(done)
            counts = f'"prompt_tokens":{prompt},"total_tokens":{prompt + completion},"completion_tokens":{completion}'
            tail = f',"logprobs":null,"finish_reason":{json.dumps(finish)}}}],"usage":{{{counts}}}}}\n\n'
        if self.job.endpoint == "completions":
            return f'{self._head}"text":{value}{tail}'.encode()
        role = '"role":"assistant",' if first and self.role_in_first else ""
        if kind == "reasoning":
            fields = ",".join(f'"{name}":{value}' for name in reasoning_fields(self.reasoning_field))
            return f'{self._head}"delta":{{{role}{fields}}}{tail}'.encode()
        return f'{self._head}"delta":{{{role}"content":{value}}}{tail}'.encode()

    def role_event(self) -> bytes:
        return (
            self._head + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
        ).encode()

    def usage_event(self, usage_obj: JsonObject) -> bytes:
        obj = "chat.completion.chunk" if self.job.endpoint == "chat" else "text_completion"
        chunk = {
            "id": self.job.response_id,
            "object": obj,
            "created": self.job.created,
            "model": self.job.model,
            "choices": [],
            "usage": usage_obj,
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def timings_event(self, timings: JsonObject) -> bytes:
        """llama.cpp's `timings`, here in a chunk of its own just before usage and [DONE]."""
        chunk = {"id": self.job.response_id, "object": "chat.completion.chunk", "choices": [], "timings": timings}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def done_event(self) -> bytes:
        return DONE

    def malformed_event(self) -> bytes:
        return f'data: {{"id":"{self.job.response_id}","choices":[{{"delta":{{"content":\n\n'.encode()

    def full_body(self, usage_obj: JsonObject | None, timings: JsonObject | None = None) -> bytes:
        job, texts = self.job, self.job.plan.texts
        reasoning_text = "".join(texts[: job.reasoning])
        content = None if self.null_content else "".join(texts[job.reasoning :])
        if job.plan.kinds is not None:
            reasoning_text, content = self._harmony_whole()
            content = None if self.null_content else content
        if job.tools is not None:  # an answer of tool calls: no content (sim/tools.py)
            content = None
        if job.endpoint == "chat":
            message: JsonObject = {"role": "assistant", "content": content}
            if job.tools is not None:
                message["tool_calls"] = tools.chat_calls(job.tools)
            message |= {name: reasoning_text or None for name in reasoning_fields(self.reasoning_field)}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": job.plan.finish_reason}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": job.plan.finish_reason}
            if job.echo is not None:  # echo with logprobs: the prompt first, each token scored
                choice["text"], choice["logprobs"] = echoed(job.echo, texts)
            obj = "text_completion"
        body = {"id": job.response_id, "object": obj, "created": job.created, "model": job.model, "choices": [choice]}
        if usage_obj is not None:
            body["usage"] = usage_obj
        if timings is not None:
            body["timings"] = timings
        return json.dumps(body).encode()


def echoed(echo: tuple[list[str], list[float]], texts: list[str]) -> tuple[str, JsonObject]:
    """An echoed completion's text and logprobs, as vLLM gives them: the prompt's tokens then the
    generated ones, the first prompt token unscored."""
    pieces, scores = echo
    tokens = pieces + texts
    token_logprobs: list[float | None] = [None, *scores[1:], *([-1.0] * len(texts))]
    return "".join(tokens), {"tokens": tokens, "token_logprobs": token_logprobs}


RENDERERS = {api: renderer_class(Renderer, api) for api in APIS}
