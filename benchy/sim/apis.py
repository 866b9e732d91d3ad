"""The simulator's Responses (/v1/responses) and Anthropic Messages (/v1/messages) faces.

A request of either API is read as the chat request it amounts to (`to_chat`), so that it is
planned, queued, prefilled, decoded and logged in the truth log exactly as chat is (its trace's
endpoint names the API). Only the words on the wire differ: `ApiRenderer` writes the same
token events as the API's own typed events, and a whole answer in the API's shape.

Responses: response.created, output_item.added per output (reasoning, then the message),
response.reasoning_text.delta / response.output_text.delta, and response.completed (or
response.incomplete when max_output_tokens cut it) with usage; no [DONE].
Messages: message_start (input usage), content_block_start per block (thinking, then text),
content_block_delta (thinking_delta / text_delta), content_block_stop, message_delta (stop
reason, usage), message_stop. Usage is Anthropic's: input_tokens leaves out the tokens read
from the cache, which are cache_read_input_tokens.
"""

from __future__ import annotations

import json
from typing import Any

from benchy.jsontypes import JsonObject
from benchy.sim import tools
from benchy.sim.engine import REASONING

APIS = ("responses", "messages")
ID_PREFIX = {
    "responses": "resp",
    "messages": "msg",
    "embeddings": "emb",
    "rerank": "rerank",
}  # embeddings: sim/embeddings.py


class BadRequest(ValueError):
    """A request the API refuses (HTTP 400); the message is the error's."""


def to_chat(body: JsonObject, api: str) -> JsonObject:
    """The chat body a Responses or Messages body amounts to: the options both share (model,
    stream, temperature, ignore_eos, min_tokens…) as they are, the API's own fields renamed."""
    if api == "responses":
        return _responses_to_chat(body)
    return _messages_to_chat(body)


def _responses_to_chat(body: JsonObject) -> JsonObject:
    own = ("input", "instructions", "max_output_tokens", "reasoning")
    chat = {k: v for k, v in body.items() if k not in own}
    given = body.get("input")
    messages = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'input' must be a string or a non-empty list of messages")
    messages = _items_as_messages(messages)
    if isinstance(body.get("instructions"), str):
        messages = [{"role": "system", "content": body["instructions"]}, *messages]
    chat["messages"] = messages
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        chat["reasoning_effort"] = reasoning["effort"]
    chat["stream_options"] = {"include_usage": True}  # usage is part of the API's end event
    return chat


def _messages_to_chat(body: JsonObject) -> JsonObject:
    if body.get("max_tokens") is None:
        raise BadRequest("max_tokens: Field required")
    chat = {k: v for k, v in body.items() if k not in ("system", "stop_sequences", "thinking")}
    messages = body.get("messages")
    if isinstance(messages, list):
        messages = chat["messages"] = _blocks_as_messages(messages)
    if isinstance(body.get("system"), (str, list)) and isinstance(messages, list):
        chat["messages"] = [{"role": "system", "content": body["system"]}, *messages]
    if body.get("stop_sequences") is not None:
        chat["stop"] = body["stop_sequences"]
    chat["stream_options"] = {"include_usage": True}
    return chat


def _items_as_messages(items: list[Any]) -> list[JsonObject]:
    """Responses input items as chat messages: a `function_call` joins the assistant message
    before it as a tool call (or opens one), a `function_call_output` is a tool message; what
    the chat template renders is then the same history on either API."""
    out: list[Any] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function"}
            call["function"] = {"name": item.get("name"), "arguments": item.get("arguments")}
            if not (out and isinstance(out[-1], dict) and out[-1].get("role") == "assistant"):
                out.append({"role": "assistant", "content": None})
            out[-1].setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
        elif isinstance(item, dict) and kind == "message":
            out.append({k: v for k, v in item.items() if k != "type"})
        else:
            out.append(item)
    return out


def _blocks_as_messages(messages: list[Any]) -> list[Any]:
    """Messages API tool blocks as chat messages: an assistant's `tool_use` blocks its tool
    calls (its text blocks its content), a user message of `tool_result` blocks one tool
    message each; any other message as it is."""
    out: list[Any] = []
    for m in messages:
        blocks = m.get("content") if isinstance(m, dict) else None
        if not isinstance(blocks, list) or not any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in blocks
        ):
            out.append(m)
            continue
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        out += [{"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": b.get("content")} for b in results]
        uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if uses:
            text = "".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            calls = [
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input"))},
                }
                for b in uses
            ]
            out.append({"role": m.get("role"), "content": text, "tool_calls": calls})
    return out


def _event(name: str, obj: JsonObject) -> str:
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n"


class ApiRenderer:
    """Renders a chat Renderer's token events and whole answer in a Responses or Messages
    shape. Mixed into render.Renderer by `renderer_class` (render imports this module, not the
    reverse), it overrides the methods that write words on the wire."""

    api: str = "responses"
    _block: str | None
    _blocks: int
    _seq: int

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._block, self._blocks, self._seq = None, 0, 0  # the open block, blocks opened, events typed

    def _head_events(self) -> str:
        job = self.job  # type: ignore[attr-defined]
        if self.api == "messages":
            prompt = len(job.prompt_ids)
            message = {"id": job.response_id, "type": "message", "role": "assistant", "model": job.model}
            message.update({"content": [], "stop_reason": None, "usage": {"input_tokens": prompt, "output_tokens": 0}})
            return _event("message_start", {"type": "message_start", "message": message})
        response = {"id": job.response_id, "object": "response", "created_at": job.created, "model": job.model}
        return self._typed("response.created", {"response": {**response, "status": "in_progress", "output": []}})

    def _typed(self, name: str, fields: JsonObject) -> str:
        self._seq += 1
        return _event(name, {"type": name, "sequence_number": self._seq - 1, **fields})

    def _switch(self, kind: str) -> str:
        """The events that close the open block (if another) and open one of `kind`."""
        kind = "reasoning" if kind == REASONING else "content"
        if kind == self._block:
            return ""
        out = self._close_block()
        self._block, self._blocks = kind, self._blocks + 1
        index = self._blocks - 1
        if self.api == "messages":
            block = {"type": "thinking", "thinking": ""} if kind == "reasoning" else {"type": "text", "text": ""}
            return out + _event(
                "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
            )
        item = (
            {"type": "reasoning", "id": f"rs_{index}"}
            if kind == "reasoning"
            else {"type": "message", "id": f"msg_{index}"}
        )
        return out + self._typed("response.output_item.added", {"output_index": index, "item": item})

    def _close_block(self) -> str:
        if self._block is None:
            return ""
        index = self._blocks - 1
        if self.api == "messages":
            return _event("content_block_stop", {"type": "content_block_stop", "index": index})
        return self._typed("response.output_item.done", {"output_index": index})

    def _token_event(self, kind: str, text: str, first: bool, finish: str | None, done: int = 0) -> bytes:
        head = self._head_events() if first and self.role_in_first else ""  # type: ignore[attr-defined]
        if not text:
            return head.encode()
        out = head + self._switch(kind)
        index = self._blocks - 1
        if self.api == "messages":
            key, kind_name = ("thinking", "thinking_delta") if self._block == "reasoning" else ("text", "text_delta")
            delta = {"type": "content_block_delta", "index": index, "delta": {"type": kind_name, key: text}}
            return (out + _event("content_block_delta", delta)).encode()
        name = "response.reasoning_text.delta" if self._block == "reasoning" else "response.output_text.delta"
        return (out + self._typed(name, {"output_index": index, "content_index": 0, "delta": text})).encode()

    def _tool_event(self, call: int, text: str, opens: bool, first: bool, finish: str | None) -> bytes:
        """A tool call's events (sim/tools.py): as it opens, a block of its own with its name
        (Messages' tool_use, Responses' function_call item); then its arguments' fragments."""
        out = self._head_events() if first and self.role_in_first else ""  # type: ignore[attr-defined]
        if opens:
            out += self._close_block()
            self._block, self._blocks = f"tool{call}", self._blocks + 1
        index = self._blocks - 1
        if self.api == "messages":
            if opens:
                block = {"type": "tool_use", "id": f"toolu_{call}", "name": text, "input": {}}
                start = {"type": "content_block_start", "index": index, "content_block": block}
                return (out + _event("content_block_start", start)).encode()
            delta = {"type": "input_json_delta", "partial_json": text}
            return (
                out + _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            ).encode()
        if opens:
            item = {"type": "function_call", "id": f"fc_{call}", "call_id": tools.call_id(call), "name": text}
            item.update({"arguments": "", "status": "in_progress"})
            return (out + self._typed("response.output_item.added", {"output_index": index, "item": item})).encode()
        fields = {"item_id": f"fc_{call}", "output_index": index, "delta": text}
        return (out + self._typed("response.function_call_arguments.delta", fields)).encode()

    def role_event(self) -> bytes:
        return self._head_events().encode()

    def usage_event(self, usage_obj: JsonObject) -> bytes:
        """The API's end event with its usage (Messages: the block's stop and message_delta)."""
        out = self._close_block()
        self._block = None
        finish = self.job.plan.finish_reason  # type: ignore[attr-defined]
        if self.api == "messages":
            delta = {"stop_reason": _stop_reason(finish), "stop_sequence": None}
            message_delta = {"type": "message_delta", "delta": delta, "usage": anthropic_usage(usage_obj)}
            return (out + _event("message_delta", message_delta)).encode()
        name = "response.completed" if finish != "length" else "response.incomplete"
        return (out + self._typed(name, {"response": self._response(usage_obj, [])})).encode()

    def done_event(self) -> bytes:
        """The stream's last event: Messages' message_stop; a Responses stream ends with its end event."""
        return _event("message_stop", {"type": "message_stop"}).encode() if self.api == "messages" else b""

    def timings_event(self, timings: JsonObject) -> bytes:
        return b""  # llama.cpp's timings ride chat chunks only

    def _response(self, usage_obj: JsonObject | None, output: list[JsonObject]) -> JsonObject:
        job = self.job  # type: ignore[attr-defined]
        finish = job.plan.finish_reason
        response: JsonObject = {
            "id": job.response_id,
            "object": "response",
            "created_at": job.created,
            "model": job.model,
        }
        response["status"] = "incomplete" if finish == "length" else "completed"
        response["incomplete_details"] = {"reason": "max_output_tokens"} if finish == "length" else None
        response["output"] = output
        if usage_obj is not None:
            response["usage"] = responses_usage(usage_obj)
        return response

    def full_body(self, usage_obj: JsonObject | None, timings: JsonObject | None = None) -> bytes:
        chat = json.loads(super().full_body(usage_obj, None))  # type: ignore[misc]
        message = chat["choices"][0]["message"]
        reasoning, content = message.get("reasoning_content") or "", message.get("content") or ""
        if self.api == "messages":
            blocks = ([{"type": "thinking", "thinking": reasoning}] if reasoning else []) + (
                [] if message.get("tool_calls") else [{"type": "text", "text": content}]
            )
            blocks += [_tool_use(c) for c in message.get("tool_calls") or []]
            finish = self.job.plan.finish_reason  # type: ignore[attr-defined]
            body = {"id": chat["id"], "type": "message", "role": "assistant", "model": chat["model"], "content": blocks}
            body.update({"stop_reason": _stop_reason(finish), "stop_sequence": None})
            if usage_obj is not None:
                body["usage"] = anthropic_usage(usage_obj)
            return json.dumps(body).encode()
        output = (
            [{"type": "reasoning", "id": "rs_0", "content": [{"type": "reasoning_text", "text": reasoning}]}]
            if reasoning
            else []
        )
        text: JsonObject = {"type": "output_text", "text": content, "annotations": []}
        if not message.get("tool_calls"):
            output.append(
                {"type": "message", "id": "msg_0", "role": "assistant", "status": "completed", "content": [text]}
            )
        output += [_function_call(i, c) for i, c in enumerate(message.get("tool_calls") or [])]
        return json.dumps(self._response(usage_obj, output)).encode()


def _stop_reason(finish: str | None) -> str:
    """Messages' stop_reason of chat's finish_reason."""
    return {"length": "max_tokens", "tool_calls": "tool_use"}.get(str(finish), "end_turn")


def _tool_use(call: JsonObject) -> JsonObject:
    fn = call["function"]
    return {
        "type": "tool_use",
        "id": f"toolu_{call['id']}",
        "name": fn["name"],
        "input": tools.parsed_input(fn["arguments"]),
    }


def _function_call(i: int, call: JsonObject) -> JsonObject:
    fn = call["function"]
    item = {"type": "function_call", "id": f"fc_{i}", "call_id": call["id"], "name": fn["name"]}
    return {**item, "arguments": fn["arguments"], "status": "completed"}


def responses_usage(usage: JsonObject) -> JsonObject:
    out: JsonObject = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
    out["input_tokens_details"] = {"cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)}
    out["output_tokens_details"] = {"reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"]}
    out["total_tokens"] = usage["total_tokens"]
    return out


def anthropic_usage(usage: JsonObject) -> JsonObject:
    details = usage.get("prompt_tokens_details")
    out: JsonObject = {"output_tokens": usage["completion_tokens"]}
    if details is None:  # the server does not say what it cached
        return {"input_tokens": usage["prompt_tokens"], **out}
    cached = details.get("cached_tokens") or 0
    return {"input_tokens": usage["prompt_tokens"] - cached, "cache_read_input_tokens": cached, **out}


def renderer_class(base: type, api: str) -> type:
    """render.Renderer with the API's words (a class per API, made once by render)."""
    return type(f"{api.title()}Renderer", (ApiRenderer, base), {"api": api})
