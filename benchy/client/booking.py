"""What an API's event reader may do with the record reader it books into (reader.py's
StreamReader): the Responses and Messages readers (responses.py, messages.py) and the whole
answer's (whole.py) are functions of a parsed payload and this reader, so that reader.py
imports them and none of them imports reader.py."""

from __future__ import annotations

from typing import Any, Protocol

from benchy.client.draft import Draft


class Booker(Protocol):
    rec: Draft  # the request's answer as it arrives (client/draft.py)
    done: bool  # the API's end event came
    bad_events: int  # payloads of a shape the API does not have
    state: dict[str, Any]  # what an API's reader keeps between events (Messages: usage so far)

    def book_text(self, now: float, content: str, reasoning: str) -> None: ...

    def book_tool(self, now: float, text: str) -> None: ...  # a tool call's name or arguments

    def book_usage(self, usage: dict[str, Any]) -> None: ...  # chat-named usage

    def fail(self, kind: str, message: str) -> None: ...


class Api(Protocol):
    """An API other than OpenAI's chat and completions, as its module (responses.py,
    messages.py) is: its request body, its whole answer in chat's shape, its event reader."""

    def payload(
        self, model: str | None, prompt: str, max_tokens: int, stream: bool, extra: dict[str, Any] | None
    ) -> dict[str, Any]: ...

    def as_chat(self, obj: object) -> object: ...

    def book(self, reader: Booker, obj: dict[str, Any], now: float) -> None: ...
