"""OpenAI Harmony, the chat format of gpt-oss: prompt rendering, stream classification, stop checks.

A Harmony message is ``<|start|>{header}<|message|>{content}<|end|>``. The header is the role,
optionally followed by `` to={recipient}``, ``<|channel|>{channel}`` and a content type
(``<|constrain|>json`` in tool calls). A chat prompt is a system message, an optional developer
message and the user message, then ``<|start|>assistant`` for the model to continue::

    <|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
    Knowledge cutoff: 2024-06
    Current date: 2025-06-28

    Reasoning: medium

    # Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>
    <|start|>developer<|message|># Instructions

    {developer}<|end|><|start|>user<|message|>{user}<|end|><|start|>assistant

(no newline between messages; the breaks above are only for reading). The model's raw
completion therefore starts inside the assistant header, with its reasoning first::

    <|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant<|channel|>final<|message|>{answer}<|return|>

``<|return|>`` (done) and ``<|call|>`` (tool call) are the only stop markers; ``<|end|>`` only
closes one message of several, so using it (or ``<|message|>``, ``<|start|>``, ``<|channel|>``) as
a stop string truncates every response (see ``dangerous_stops``).

Rendering follows openai/harmony's renderer: the developer message is ``# Instructions\\n\\n{text}``
with no trailing blank line (the first HF chat_template.jinja for gpt-oss appended ``\\n\\n``).
"""

from __future__ import annotations

import re

START, END, MESSAGE, CHANNEL = "<|start|>", "<|end|>", "<|message|>", "<|channel|>"
RETURN, CALL, CONSTRAIN = "<|return|>", "<|call|>", "<|constrain|>"
MARKERS = (START, END, MESSAGE, CHANNEL, RETURN, CALL, CONSTRAIN)
RESPONSE_END_STOPS = (RETURN, CALL)

CHANNELS = ("analysis", "final", "commentary", "marker")
MODEL_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
KNOWLEDGE_CUTOFF = "2024-06"
REASONING_EFFORTS = ("low", "medium", "high")

_MARKER_RE = re.compile("|".join(re.escape(m) for m in MARKERS))
_MARKER_PREFIXES = frozenset(m[:k] for m in MARKERS for k in range(1, len(m)))
_LONGEST_PREFIX = max(len(m) for m in MARKERS) - 1
_MESSAGE_ENDS = (END, RETURN, CALL)


# ---------------------------------------------------------------------------------- rendering


def render_message(role: str, content: str, channel: str | None = None) -> str:
    header = role if channel is None else f"{role}{CHANNEL}{channel}"
    return f"{START}{header}{MESSAGE}{content}{END}"


def system_content(system_date: str, reasoning_effort: str) -> str:
    if reasoning_effort not in REASONING_EFFORTS:
        raise ValueError(f"reasoning_effort must be one of {REASONING_EFFORTS}, not {reasoning_effort!r}")
    return (
        f"{MODEL_IDENTITY}\nKnowledge cutoff: {KNOWLEDGE_CUTOFF}\nCurrent date: {system_date}\n\n"
        f"Reasoning: {reasoning_effort}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every message."
    )


def render_prompt(
    user: str, *, system_date: str = "2025-06-28", reasoning_effort: str = "medium", developer: str | None = None
) -> str:
    """The full /v1/completions prompt for one user turn, ending with ``<|start|>assistant``."""
    parts = [render_message("system", system_content(system_date, reasoning_effort))]
    if developer is not None:
        parts.append(render_message("developer", f"# Instructions\n\n{developer}"))
    parts.append(render_message("user", user))
    parts.append(f"{START}assistant")
    return "".join(parts)


def render_response(analysis: str, final: str) -> str:
    """The raw completion gpt-oss emits after ``render_prompt``: reasoning, then the answer."""
    return f"{CHANNEL}analysis{MESSAGE}{analysis}{END}{START}assistant{CHANNEL}final{MESSAGE}{final}{RETURN}"


# ---------------------------------------------------------------------------- stream parsing


def _partial_marker_len(text: str) -> int:
    """Length of the longest tail of text that could still grow into a marker."""
    for k in range(min(len(text), _LONGEST_PREFIX), 0, -1):
        if text[-k:] in _MARKER_PREFIXES:
            return k
    return 0


def channel_of_header(header: str) -> str:
    """Content channel named by a header; no channel means user-facing ("final")."""
    match = re.search(r"<\|channel\|>\s*([\w.-]*)", header)
    if match is None:
        return "final"
    name = match.group(1)
    # Any other channel name is neither reasoning nor the answer; file it with tool traffic.
    return name if name in ("analysis", "final", "commentary") else "commentary"


class HarmonyStream:
    """Splits streamed completion text into (channel, text) pieces, one delta at a time.

    channel is "analysis", "final", "commentary", or "marker" for special tokens and header
    text (role, channel name, recipient, content type) and anything between messages.

    Text before the first marker counts as "final": that is the answer of a model or server
    that does not emit Harmony markers, and also of a prompt that pre-opens the final channel.
    If markers never show up although the text looks like Harmony, see ``markers_missing``.

    A tail that may be the start of a split marker (``<|chan``) is held back until the next
    feed or ``close``; held text is at most 12 chars, so each feed costs O(len(delta)).
    """

    def __init__(self) -> None:
        self.chars = dict.fromkeys(CHANNELS, 0)
        self.saw_markers = False
        self._pending = ""
        self._state = "content"  # "content" | "header" | "between"
        self._channel = "final"
        self._header: list[str] = []

    @property
    def channel(self) -> str:
        """Where the next text will go."""
        return self._channel if self._state == "content" else "marker"

    def feed(self, delta: str) -> list[tuple[str, str]]:
        text = self._pending + delta
        held = _partial_marker_len(text)
        self._pending = text[len(text) - held :]
        return self._split(text[: len(text) - held])

    def close(self) -> list[tuple[str, str]]:
        """End of stream: releases a held tail that never became a marker."""
        text, self._pending = self._pending, ""
        return self._split(text)

    def classify_delta(self, delta: str) -> str:
        """Feeds one SSE event's text and says what it was (see ``delta_kind``)."""
        return delta_kind(self.feed(delta))

    def _split(self, text: str) -> list[tuple[str, str]]:
        pieces: list[tuple[str, str]] = []
        pos = 0
        for match in _MARKER_RE.finditer(text):
            self._add_text(text[pos : match.start()], pieces)
            self._add_marker(match.group(), pieces)
            pos = match.end()
        self._add_text(text[pos:], pieces)
        return pieces

    def _add_text(self, text: str, pieces: list[tuple[str, str]]) -> None:
        if not text:
            return
        if self._state == "header":
            self._header.append(text)
        self._record(self.channel, text, pieces)

    def _add_marker(self, marker: str, pieces: list[tuple[str, str]]) -> None:
        self.saw_markers = True
        if marker == MESSAGE:
            self._channel = channel_of_header("".join(self._header))
            self._state, self._header = "content", []
        elif marker in _MESSAGE_ENDS:
            self._state = "between"
        elif marker == START or self._state != "header":
            # A completion opens mid-header (``<|channel|>`` right after the prompt).
            self._state, self._header = "header", [marker]
        else:
            self._header.append(marker)
        self._record("marker", marker, pieces)

    def _record(self, channel: str, text: str, pieces: list[tuple[str, str]]) -> None:
        self.chars[channel] += len(text)
        pieces.append((channel, text))


def delta_kind(pieces: list[tuple[str, str]]) -> str:
    """One word for a delta's pieces: "content" if it has final text, else "reasoning",
    "commentary", "marker" (markers/headers only) or "empty" (nothing, or all held back)."""
    channels = {channel for channel, _ in pieces}
    for channel, kind in (
        ("final", "content"),
        ("analysis", "reasoning"),
        ("commentary", "commentary"),
        ("marker", "marker"),
    ):
        if channel in channels:
            return kind
    return "empty"


def parse_response(text: str) -> dict[str, str]:
    """A whole completion's text per channel (markers and headers under "marker")."""
    stream = HarmonyStream()
    parts: dict[str, list[str]] = {channel: [] for channel in CHANNELS}
    for channel, piece in stream.feed(text) + stream.close():
        parts[channel].append(piece)
    return {channel: "".join(texts) for channel, texts in parts.items()}


# vLLM with skip_special_tokens=True drops the markers but keeps header words:
# "analysisWe need to ...assistantfinalParis".
_STRIPPED_HEADER_RE = re.compile(r"assistant(?:final|analysis|commentary)")
_STRIPPED_START_RE = re.compile(r"\s*(?:analysis|commentary)(?![\s.,;:!?'\"-])\S")


def markers_missing(total_text: str) -> bool:
    """True when text looks like Harmony whose special tokens the server stripped."""
    if _MARKER_RE.search(total_text):
        return False
    return bool(_STRIPPED_HEADER_RE.search(total_text) or _STRIPPED_START_RE.match(total_text))


# ------------------------------------------------------------------------------ stop strings

# Stand-in content that no stop string contains, so only the format's own text can match.
_FILLER = "\x00"
_CHAT_RESPONSE = render_response(_FILLER, _FILLER)
_TOOL_CALL_RESPONSE = (
    f"{CHANNEL}analysis{MESSAGE}{_FILLER}{END}"
    f"{START}assistant{CHANNEL}commentary to=functions.f {CONSTRAIN}json"
    f"{MESSAGE}{_FILLER}{CALL}"
)

_KNOWN_STOP_REASONS = {
    MESSAGE: "matches right after the channel header <|channel|>analysis<|message|>: every answer becomes 0 tokens",
    CHANNEL: "the completion opens with <|channel|>: generation stops at its first token, every answer is empty",
    END: "<|end|> ends the analysis message before the final one: the answer is never generated (reasoning only)",
    START: "<|start|>assistant opens the final message after the analysis one: the answer is "
    "never generated (reasoning only)",
    CONSTRAIN: "appears in tool-call headers (<|constrain|>json): tool calls are cut before their arguments",
}


def _stop_reason(stop: str) -> str | None:
    if stop in _KNOWN_STOP_REASONS:
        return _KNOWN_STOP_REASONS[stop]
    at = _CHAT_RESPONSE.find(stop)
    if at != -1 and at < _CHAT_RESPONSE.index(RETURN):
        first_content = _CHAT_RESPONSE.index(_FILLER)
        if at < first_content:
            return "matches the analysis header before any text: every answer becomes 0 tokens"
        return "matches between the analysis and final messages: the answer is never generated"
    at = _TOOL_CALL_RESPONSE.find(stop)
    if at != -1 and at < _TOOL_CALL_RESPONSE.index(CALL):
        return "matches inside a tool-call header: tool calls are cut before their arguments"
    return None


def dangerous_stops(stops: list[str]) -> list[tuple[str, str]]:
    """(stop, reason) for each stop string that fires inside a normal Harmony response.

    Safe: ``RESPONSE_END_STOPS`` and anything matching only there or in free text.
    """
    flagged = []
    for stop in stops:
        reason = _stop_reason(stop) if stop else None
        if reason is not None:
            flagged.append((stop, reason))
    return flagged
