"""A non-streamed answer (`--no-stream`, or a scenario's `stream = false`): the whole JSON body
read into the same record a stream fills, so that every count, check and e2e figure works.

Some deployments and gateways stream nothing. The answer then arrives whole: its text is booked
as one event at the body's end (reasoning and content apart, as the API names them), usage and
llama.cpp's timings are read from the body, and the record says `streamed = False`, so that the
figures only a stream can give (TTFT, inter-token latency, decode and prefill rates) are
withheld with the reason (measure/metrics.py, code not_streamed) rather than taken from the
end of the answer. Responses and Messages bodies are read as chat completions (each module's
as_chat). A body that is not a JSON answer fails with kind bad_stream, an `error` object with
kind server_error.
"""

from __future__ import annotations

from types import ModuleType

from benchy.client.stream import _loads, _StreamReader
from benchy.measure.records import RequestRecord


class WholeReader(_StreamReader):
    """Collects the body; close() reads it (see the module docstring)."""

    __slots__ = ("body", "api")

    def __init__(self, rec: RequestRecord, *args, api: ModuleType | None = None, **kwargs) -> None:
        super().__init__(rec, *args, **kwargs)
        self.body = bytearray()
        self.api = api  # client/responses.py or client/messages.py, else None: chat or completions
        rec.streamed = False

    def feed(self, chunk: bytes, now: float) -> float | None:
        if self.rec.first_chunk_s is None:
            self.rec.first_chunk_s = now - self.t0
        self.body.extend(chunk)
        return None  # the answer is whole only when the body ends

    def close(self, now: float) -> None:
        rec = self.rec
        rec.end_s = now
        obj = _loads(bytes(self.body))
        obj = self.api.as_chat(obj) if self.api is not None else obj
        if not isinstance(obj, dict):
            self.fail("bad_stream", f"the answer is not a JSON object: {bytes(self.body[:200])!r}")
            return
        if obj.get("error"):
            err = obj["error"]
            self.fail("server_error", str(err.get("message", err) if isinstance(err, dict) else err)[:300])
            return
        choices = obj.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if choice is None:
            self.fail("bad_stream", "the answer has no choice")
            return
        self._answer(choice, now)
        usage, timings = obj.get("usage"), obj.get("timings")
        if isinstance(usage, dict):
            self._usage(usage)
        if isinstance(timings, dict):
            rec.server_timings = timings
        self._settle()

    def _answer(self, choice: dict, now: float) -> None:
        """The answer's text as events at its end: reasoning, then content, as the API split them."""
        message = choice.get("message")
        held: dict = message if isinstance(message, dict) else choice
        reasoning = held.get("reasoning_content") or held.get("reasoning")
        content = held.get("content") if isinstance(message, dict) else choice.get("text")
        if isinstance(reasoning, str) and reasoning:
            self._text_event(now, "", reasoning)
        if isinstance(content, str) and content:
            self._text_event(now, content, "")
        elif isinstance(message, dict) and "content" in message and content is None:
            self.rec.content_null_events += 1
        finish = choice.get("finish_reason")
        if isinstance(finish, str):
            self.rec.finish_reason = finish
