"""Second opinions on a stream, so that no figure rests on a single piece of evidence.

A server's `usage` can be wrong or missing, its events can carry one token or eight, a proxy
can hold its bytes back, and a model without a reasoning parser puts its thinking in the
answer. Each function here weighs one question with two or more independent witnesses:

  how many tokens?      witnesses ranked by what they know. The server's own counts first:
                        usage, llama.cpp's timings.predicted_n, vLLM's per-chunk usage, the
                        server's /tokenize of the streamed text; the events (each carries at
                        least one token; they count tokens only where usage or another exact
                        witness shows one token an event); last benchy's own tokenizer, scaled
                        by calibration: an estimate, since no real server's tokenizer is
                        o200k. usage backed by one exact witness is the count; usage stands
                        unless two independent witnesses agree against it (the server's
                        /tokenize and a local count scaled on /tokenize are one: both count
                        the streamed text; scaled on tokens the server was known to generate,
                        they are two, weighed by their own spread); the local count alone
                        overrules it only so scaled and beyond any ratio of two tokenizers,
                        else it is noted as not this model's
                                                                       → `token_count`

`measure/delivery.py` asks how those tokens came (per event, per arrival, buffered or live);
`measure/think.py` whether they were reasoning written inline.

Functions take plain values (times, per-event texts, counts), so they hold for records, saved
results and tests alike. Nothing here reads a file or the network.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import tiktoken

from benchy.measure import tokenizer
from benchy.measure.think import THINK_CLOSE, THINK_OPEN

if TYPE_CHECKING:
    import tiktoken

# usage and the independent count agree within this ratio, or this many tokens (a chat
# endpoint's hidden special tokens, e.g. Harmony's channel markers, are counted but not sent).
USAGE_RATIO_TOLERANCE = 0.2
USAGE_ABS_TOLERANCE = 16

# A server's prompt count may miss the target by this share or this many tokens (calibration is
# within ±1%; a foreign tokenizer splits the nonce and filler a little differently) before the
# prompt counts as truncated or padded.
PROMPT_LENGTH_TOLERANCE = 0.1
PROMPT_LENGTH_SLACK = 8

# How a run's prompt lengths were made (load/lengths.py): counted by the server's /tokenize or
# by --tokenizer (exact), else benchy's o200k count calibrated on usage (an estimate).
LENGTHS_SERVER_TOKENIZE = "server_tokenize"
LENGTHS_TOKENIZER_FILE = "tokenizer_file"
LENGTHS_SERVER_USAGE = "server_usage"  # words fitted on the usage of tiny requests
LENGTHS_O200K = "o200k_calibrated"
# An exact prompt (words one server token each) may still miss by a token or two where the chat
# template joins or trims the text's first word differently (Llama-3's `| trim`).
EXACT_PROMPT_SLACK = 2
LENGTH_METHODS = (LENGTHS_SERVER_TOKENIZE, LENGTHS_TOKENIZER_FILE, LENGTHS_SERVER_USAGE, LENGTHS_O200K)


# ---------------------------------------------------------------- texts and local counts


def prompt_length_missed(target: int, counted: int, slack: int | None = None) -> bool:
    """Whether the server's prompt count is too far from the target to label the row with it:
    by more than `slack` tokens for a prompt fitted to the server's tokenizer, else by more than
    the estimate's tolerance."""
    allowed = slack if slack is not None else estimate_slack(target)
    return abs(counted - target) > allowed


def estimate_slack(target: int) -> float:
    """How far the server's count may miss a prompt whose length is an o200k estimate."""
    return max(PROMPT_LENGTH_SLACK, PROMPT_LENGTH_TOLERANCE * target)


def history_window(turn: int | None, control: bool, target: int, slack: int | None) -> tuple[int, int] | None:
    """A later turn's lengths (its target ± its slack): the history it resends is the server's
    to count (the previous prompt, the answer resent, the template's wrappers), so the plan
    gave a window, not a fitted length (load/conversations._target_prompt); None for a prompt
    benchy fitted (turn 1, a cold control, a single turn)."""
    if not turn or turn < 2 or control or slack is None:
        return None
    return target - slack, target + slack


def event_texts(text: str, chars: list[int]) -> list[str]:
    """The text of each event, from the stream's concatenated text and its per-event lengths."""
    out, pos = [], 0
    for n in chars:
        out.append(text[pos : pos + n])
        pos += n
    return out


def local_event_tokens(texts: list[str]) -> list[int]:
    """Tokens per event by benchy's o200k tokenizer: the whole text is encoded once (so a word
    split across events is not counted twice) and each token goes to the event holding its
    first character. <think> and </think> count one token each, as in the R1/Qwen vocabularies
    that emit them (o200k splits each into three). An event never counts less than one: every
    event carried a token."""
    return local_tokens_of("".join(texts), [len(t) for t in texts])


def local_tokens_of(whole: str, chars: list[int]) -> list[int]:
    """local_event_tokens of the events whose texts, `chars[i]` characters each, make `whole`
    (a record's token_event_text and token_event_chars: no text cut and joined again)."""
    if not whole:
        return [1] * len(chars)
    if len(chars) == 1:  # a whole answer (non-streamed) or one event: a count, no numpy
        return [max(1, _token_total(whole))]
    if whole.isascii() and "<" not in whole:  # no think tag, no special token: one encode says it
        ids = tokenizer.encoding().encode(whole, allowed_special="all")
        lengths = _token_length_list()
        if len(ids) == len(chars) and [lengths[i] for i in ids] == chars:
            return [1] * len(chars)  # each event is exactly one token (ASCII: a byte a character)
        offsets = _ascii_offsets(ids)
    else:
        offsets = _token_offsets(whole)
    starts = np.zeros(len(chars), dtype=np.int64)
    np.cumsum(chars[:-1], out=starts[1:])
    holders = np.searchsorted(starts, offsets, side="right") - 1  # one search, not one a token
    counts = np.bincount(holders, minlength=len(chars))
    per_event: list[int] = np.maximum(counts, 1).tolist()
    return per_event


_THINK_TAG = re.compile(f"{re.escape(THINK_OPEN)}|{re.escape(THINK_CLOSE)}")


def _offsets(enc: tiktoken.Encoding, text: str) -> np.ndarray:
    """Where each token of `text` starts. ASCII text (the usual case) needs no character
    arithmetic: a token's start is the bytes before it, a cumulative sum of the tokens'
    lengths (tiktoken's decode_with_offsets walks every byte in Python)."""
    ids = enc.encode(text, allowed_special="all")
    if not text.isascii():
        return np.asarray(enc.decode_with_offsets(ids)[1], dtype=np.int64)
    return _ascii_offsets(ids)


def _ascii_offsets(ids: list[int]) -> np.ndarray:
    """Where each token of an ASCII text starts, from its ids (_offsets)."""
    lengths = tokenizer.token_lengths()[np.asarray(ids, dtype=np.int64)]
    starts = np.zeros(len(ids), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return starts


@functools.lru_cache(maxsize=1)
def _token_length_list() -> list[int]:
    """tokenizer.token_lengths as a list: indexed a token at a time from Python, faster than the array."""
    lengths: list[int] = tokenizer.token_lengths().tolist()
    return lengths


def _token_offsets(text: str) -> np.ndarray:
    """Where each token of `text` starts (a think tag is one token)."""
    enc = tokenizer.encoding()
    pieces: list[np.ndarray] = []
    pos = 0
    for match in [*_THINK_TAG.finditer(text), None]:
        end = match.start() if match else len(text)
        if end > pos:
            pieces.append(pos + _offsets(enc, text[pos:end]))
        if match:
            pieces.append(np.array([match.start()], dtype=np.int64))
            pos = match.end()
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def _token_total(text: str) -> int:
    """len(_token_offsets(text)), without the offsets. A short text (a one-event answer, most
    often one of a few words) is counted once per process: the same text counts the same."""
    return _short_token_total(text) if len(text) <= SHORT_TEXT_CHARS else _tokens_of(text)


SHORT_TEXT_CHARS = 64


@functools.lru_cache(maxsize=4096)
def _short_token_total(text: str) -> int:
    return _tokens_of(text)


def _tokens_of(text: str) -> int:
    enc = tokenizer.encoding()
    total = pos = 0
    for match in _THINK_TAG.finditer(text):
        if match.start() > pos:
            total += len(enc.encode(text[pos : match.start()], allowed_special="all"))
        total += 1
        pos = match.end()
    return total + (len(enc.encode(text[pos:], allowed_special="all")) if pos < len(text) else 0)


@dataclass(frozen=True)
class TokenCount:
    """The completion token count the figures use, which witness it came from, who backed it
    and who disagreed (witness names: USAGE, EVENTS, PREDICTED_N, PER_CHUNK, SERVER_TOKENIZE,
    LOCAL)."""

    tokens: int
    source: str  # USAGE | EVENTS | PREDICTED_N | PER_CHUNK | SERVER_TOKENIZE | LOCAL | EVENT_FLOOR
    usage: int | None  # what the server claimed
    local: float | None  # the streamed text counted locally × calibration scale
    events: int
    mismatch: str | None = None  # why usage was not believed (None: it was, or there was none)
    predicted_n: int | None = None  # llama.cpp's timings.predicted_n
    per_chunk: int | None = None  # the last cumulative count of continuous_usage_stats
    server_tokenize: int | None = None  # the server's own /tokenize of the streamed text
    backed_by: tuple[str, ...] = ()  # witnesses that agree with the count used
    disagreed: tuple[str, ...] = ()  # witnesses that disagree with it
    # The local count alone disagreed and was outvoted: benchy's tokenizer does not match this model's.
    local_mismatch: str | None = None

    @property
    def estimate(self) -> bool:
        """True when the figure rests on benchy's own tokenizer or on the events alone."""
        return self.source in (LOCAL, EVENT_FLOOR)


USAGE, EVENTS, LOCAL, EVENT_FLOOR = "usage", "events", "local", "events (a floor)"
PREDICTED_N, PER_CHUNK, SERVER_TOKENIZE = "timings.predicted_n", "per-chunk usage", "server tokenize"
# The request ended with finish_reason "length": the server generated the max_tokens it was
# sent, no more (it stops there) and no fewer (it says it stopped there), whatever usage says.
MAX_TOKENS = "max_tokens reached"
# Tokens that make no event (an end-of-sequence or special token the server counts but does
# not send): usage may exceed the events by this many, or this share, and still be one token
# an event.
EVENT_SLACK_TOKENS = 2
EVENT_SLACK_SHARE = 0.03
# A server generates tokens it does not stream: the end-of-sequence token, a reasoning
# parser's <think> and </think>, Harmony's channel headers (gpt-oss: about ten an answer).
# Where no reasoning came apart from the answer, no parser took any: the end-of-sequence
# token alone (EVENT_SLACK_TOKENS) is unstreamed.
HIDDEN_TOKENS_MAX = 16


# Its inputs are a few scalars that repeat from request to request, and a TokenCount is frozen:
# each verdict is weighed once, not once a record (this runs for every record as it ends).
@functools.lru_cache(maxsize=4096)
def token_count(
    usage: int | None,
    local: float | None,
    events: int,
    *,
    predicted_n: int | None = None,
    per_chunk: int | None = None,
    server_tokenize: int | None = None,
    max_tokens_reached: int | None = None,
    hidden_max: int = HIDDEN_TOKENS_MAX,
    local_generated: bool = False,
    usage_at_known: float | None = None,
) -> TokenCount:
    """Which completion count to believe, by what each witness knows (module docstring):

    - usage backed by an exact witness (timings.predicted_n, per-chunk usage, the server's
      /tokenize, the max_tokens of a request that ended by length, or the events when usage
      is about one token an event) is the count;
    - usage below the event count is impossible (each event carried at least one token), and
      so is usage above the max_tokens of a request that ended by length, or below it where
      nothing else backs usage: the figures take max_tokens;
    - otherwise usage stands unless two independent witnesses agree against it
      (`usage_mismatch`); the local count alone never overrules it (`local_mismatch`), unless
      it was scaled on tokens this server was known to generate (`local_generated`) and usage
      is beyond any ratio re-tokenizing can make of it.
    `hidden_max`: how many tokens the server may have made and not streamed (HIDDEN_TOKENS_MAX
    where a reasoning parser took its tags or channel markers, else EVENT_SLACK_TOKENS).
    `usage_at_known`: usage's claim over an answer of known length at calibration (1.5: it said
    96 of 64); where it is off and the local count (a witness of its own) agrees with usage
    taken back by it, the two overrule usage, though the gap is one two tokenizers could make.
    Without believable usage: the server's own counts, then one token an event where the
    local count agrees, then the local count, then the events alone (a floor)."""
    given = {
        PREDICTED_N: predicted_n,
        PER_CHUNK: per_chunk,
        SERVER_TOKENIZE: server_tokenize,
        MAX_TOKENS: max_tokens_reached,
    }
    exact = {name: n for name, n in given.items() if n is not None}
    said = _Said(usage, local, events, exact)
    if usage is not None and usage >= events:
        backers = [name for name, n in exact.items() if _same(n, usage)]
        if _about_one_per_event(usage, events) and not _text_exceeds(server_tokenize, usage):
            if not (local_generated and local is not None and _local_exceeds(local, usage)):
                backers.append(EVENTS)
        against = _agreeing_alternative(usage, local, events, exact, hidden_max, local_generated)
        if against is None and not backers and local_generated and local is not None and server_tokenize is None:
            against = _local_alone_against(usage, local, events)
        if against is None and not backers and local_generated and local is not None:
            against = _local_with_known(usage, local, events, usage_at_known)
        limit = exact.get(MAX_TOKENS)
        if limit is not None and not _same(usage, limit) and _limit_stands(usage, limit, backers, against):
            return _at_max_tokens(said, limit)
        local_agrees = local is not None and agree(usage, local)
        if backers or against is None:
            disagreed = [name for name, n in exact.items() if not _same(n, usage)]
            if not local_agrees and local is not None:
                disagreed.append(LOCAL)
            note = (
                _local_note(usage, local, backers, local_generated) if local is not None and not local_agrees else None
            )
            backed = (*backers, LOCAL) if local_agrees else tuple(backers)
            return said.count(usage, USAGE, backed_by=backed, disagreed=tuple(disagreed), local_mismatch=note)
        value, source, names = against
        doubt = (
            f"usage claims {usage} tokens; {' and '.join(names)} agree on {value:.0f} ({events} events)"
            if len(names) > 1
            else f"usage claims {usage} tokens; the answer's text counts about {value:.0f} by benchy's "
            "tokenizer scaled on tokens this server was seen to generate, beyond any ratio of two "
            f"tokenizers ({events} events)"
        )
        return said.count(round(value), source, mismatch=doubt, backed_by=names, disagreed=(USAGE,))
    impossible = None
    if usage is not None:  # below the events
        impossible = f"usage claims {usage} tokens but {events} events carried text (each at least one)"
    return _without_usage(said, impossible)


def _limit_stands(usage: int, limit: int, backers: list[str], against: tuple[Any, ...] | None) -> bool:
    """Whether a request that ended by length made its max_tokens, against a usage that says
    otherwise: usage above it is impossible, and a re-tokenized text that counts more (a random
    model's text comes back a few tokens off) cannot say more were made than were asked, and one
    that agrees with max_tokens backs it (max_tokens is exact, a re-tokenization is not); usage
    below it stands only where a witness backs it. Witnesses that agree on fewer than max_tokens
    (a context that ran out first) are believed over it."""
    if against is not None:
        return usage > limit and (against[0] >= limit or _same(round(against[0]), limit))
    return usage > limit or not backers


def _at_max_tokens(said: _Said, limit: int) -> TokenCount:
    """The count of a request that ended by length, where usage contradicts its max_tokens."""
    backers = [name for name, n in said.exact.items() if name != MAX_TOKENS and _same(n, limit)]
    if said.events and _about_one_per_event(limit, said.events):
        backers.append(EVENTS)
    doubt = f"usage claims {said.usage} tokens but the request ended by length at its max_tokens, {limit}"
    return said.count(limit, MAX_TOKENS, mismatch=doubt, backed_by=tuple(backers), disagreed=(USAGE,))


@dataclass(frozen=True)
class _Said:
    """What the witnesses said; `count` writes the verdict with all of it."""

    usage: int | None
    local: float | None
    events: int
    exact: dict[str, int]  # the server's own counts besides usage, by witness name

    def count(self, tokens: int, source: str, **verdict: Any) -> TokenCount:
        return TokenCount(
            tokens,
            source,
            self.usage,
            self.local,
            self.events,
            predicted_n=self.exact.get(PREDICTED_N),
            per_chunk=self.exact.get(PER_CHUNK),
            server_tokenize=self.exact.get(SERVER_TOKENIZE),
            **verdict,
        )


def _text_exceeds(server_tokenize: int | None, usage: int) -> bool:
    """The server's own count of the streamed text is more than re-tokenizing can make of
    usage's (see RETOKENIZED_MIN_SHARE): the events held more than one token each, so their
    count backs nothing."""
    return server_tokenize is not None and server_tokenize * RETOKENIZED_MIN_SHARE > usage


def _local_exceeds(local: float, usage: int) -> bool:
    """_text_exceeds for the local count scaled on generated tokens, by more than an estimate's
    USAGE_ABS_TOLERANCE too: the events carried several tokens each."""
    return local - usage > USAGE_ABS_TOLERANCE and _text_exceeds(round(local), usage)


def _same(a: float, b: float) -> bool:
    """Two exact counts of the same tokens: equal but for a token that made no event."""
    return abs(a - b) <= max(EVENT_SLACK_TOKENS, EVENT_SLACK_SHARE * max(a, b))


def _about_one_per_event(count: float, events: int) -> bool:
    return events > 0 and 0 <= count - events <= max(EVENT_SLACK_TOKENS, EVENT_SLACK_SHARE * count)


def _agreeing_alternative(
    usage: int,
    local: float | None,
    events: int,
    exact: dict[str, int],
    hidden_max: int = HIDDEN_TOKENS_MAX,
    local_generated: bool = False,
) -> tuple[float, str, tuple[str, ...]] | None:
    """A count other than usage that two independent witnesses agree on: (value, the witness
    the figure takes it from, the names of both). Exact witnesses come before the events,
    the events (one token each) before the local estimate."""
    # max_tokens is weighed on its own (token_count): it says what a length finish reached.
    candidates = [(name, float(n)) for name, n in exact.items() if name != MAX_TOKENS and not _same(n, usage)]
    if events and not _about_one_per_event(usage, events):
        candidates.append((EVENTS, float(events)))
    if local is not None and not agree(usage, local):
        candidates.append((LOCAL, local))
    candidates = [(name, n) for name, n in candidates if not _hidden_tokens_explain(name, n, usage, hidden_max)]
    told = exact.get(SERVER_TOKENIZE)
    # The server's /tokenize and a local count scaled on generated tokens are independent
    # counts of the text: where they agree, they are weighed by their own spread (below).
    independent = local_generated and told is not None and local is not None and agree(told, local)
    for i, (name, value) in enumerate(candidates):
        for other, second in candidates[i + 1 :]:
            if {name, other} == _SAME_TEXT and (independent or not _text_contradicts(exact[SERVER_TOKENIZE], usage)):
                continue  # within what re-tokenizing the text can differ from generating it
            if _alternative_agrees(name, value, other, second):
                return max(value, events), name, (name, other)
    if independent:
        assert told is not None and local is not None
        hidden = _hidden_tokens_explain(SERVER_TOKENIZE, told, usage, hidden_max)
        if (
            not hidden
            and not _hidden_tokens_explain(LOCAL, local, usage, hidden_max)
            and _beyond_spread(usage, told, local)
        ):
            return max(told, events), SERVER_TOKENIZE, (SERVER_TOKENIZE, LOCAL)
    return None


def _beyond_spread(usage: int, told: float, local: float) -> bool:
    """usage off both counts of the streamed text by more than they differ from each other (or
    than two exact counts of the same tokens may: _same). The server's /tokenize and a local
    count scaled on generated tokens are independent: where they agree, re-tokenizing has not
    moved the count, and the band it needs (RETOKENIZED_MIN_SHARE) does not apply."""
    spread = max(abs(told - local), EVENT_SLACK_TOKENS, EVENT_SLACK_SHARE * max(told, local, usage))
    return abs(usage - told) > spread and abs(usage - local) > spread


def _local_alone_against(usage: int, local: float, events: int) -> tuple[float, str, tuple[str, ...]] | None:
    """The local count scaled on tokens this server was known to generate, alone against usage
    (no /tokenize, several tokens an event): two tokenizers' counts of one text differ by a
    bounded factor (RETOKENIZED_MIN_SHARE, as a server's own re-tokenizing may), so usage beyond
    it (twice, or half, what streamed) did not count this stream."""
    if abs(usage - local) <= USAGE_ABS_TOLERANCE or not _text_contradicts(round(local), usage):
        return None
    return max(local, events), LOCAL, (LOCAL,)


# usage was off at calibration, on an answer of known length, by more than this share
USAGE_AT_KNOWN_OFF = 0.05
USAGE_AT_KNOWN = "usage at a known length"  # the witness: calibration's answer that ended by length


def _local_with_known(
    usage: int, local: float, events: int, usage_at_known: float | None
) -> tuple[float, str, tuple[str, ...]] | None:
    """The local count (a witness of its own) and usage's own error at a known length agreeing
    against usage: usage claimed `usage_at_known` times an answer of known length, and this
    usage taken back by that ratio is what the streamed text counts. Two independent witnesses;
    neither alone could overrule a gap two tokenizers may make (issue 52)."""
    if usage_at_known is None or abs(usage_at_known - 1) <= USAGE_AT_KNOWN_OFF:
        return None
    if agree(usage, local) or not agree(usage / usage_at_known, local):
        return None
    return max(local, events), LOCAL, (LOCAL, USAGE_AT_KNOWN)


STREAMED_TEXT = {EVENTS, LOCAL, SERVER_TOKENIZE}


def _hidden_tokens_explain(name: str, value: float, usage: int, hidden_max: int = HIDDEN_TOKENS_MAX) -> bool:
    """A count of the streamed text (its events, its tokens) a few below usage shows tokens
    the server made and did not stream, not a wrong usage."""
    return name in STREAMED_TEXT and 0 < usage - value <= hidden_max


# The server's /tokenize and the local count both count the streamed text (and the local scale
# is calibrated on the server's /tokenize where it has one). Text re-tokenized is not quite what
# was generated: tokens merge (a random-weight model's 128 tokens came back as 90), special
# tokens are not streamed, a few split (llama.cpp's 32 came back as 34; a random model's
# bytes can split more). So the two agreeing against usage overrule it only where that cannot
# explain the gap: the text counts less than RETOKENIZED_MIN_SHARE of usage, or more than usage
# ÷ RETOKENIZED_MIN_SHARE (usage claiming twice, or half, what streamed).
_SAME_TEXT = {SERVER_TOKENIZE, LOCAL}
RETOKENIZED_MIN_SHARE = 0.6


def _text_contradicts(text: int, usage: int) -> bool:
    """The server's count of the streamed text is one re-tokenizing cannot have made of usage's."""
    return text < RETOKENIZED_MIN_SHARE * usage or _text_exceeds(text, usage)


def _alternative_agrees(name: str, value: float, other: str, second: float) -> bool:
    if LOCAL in (name, other):  # an estimate: the looser tolerance
        return agree(value, second) and (EVENTS not in (name, other) or second <= value * (1 + USAGE_RATIO_TOLERANCE))
    return _same(value, second)


# The note where usage stands alone against a local count that is a witness of its own (scaled
# on tokens the server was seen to generate, or --tokenizer's): its cause cannot be told, and
# usage is unconfirmed (checks/tokens.py: usage_unconfirmed).
USAGE_ALONE = "usage is the only witness of this count"


def _local_note(usage: int, local: float, backers: list[str], own_witness: bool = False) -> str:
    if own_witness and not backers:
        return (
            f"{USAGE_ALONE}: usage claims {usage} tokens, the streamed text counts {local:.0f} (a count of "
            f"its own), {usage / local:.2f}x apart, within what two tokenizers' counts of one text may "
            "differ, so neither can overrule the other; usage is used, unconfirmed"
        )
    backing = f"backed by {' and '.join(backers)}" if backers else "no two independent witnesses agree against it"
    return (
        f"the streamed text counts {local:.0f} tokens locally against usage {usage} ({backing}): "
        "benchy's tokenizer does not match this model's, so usage is used"
    )


def _without_usage(said: _Said, why: str | None) -> TokenCount:
    local, events = said.local, said.events
    against = (USAGE,) if said.usage is not None else ()  # usage given but impossible
    for name, n in said.exact.items():
        if n >= events and name != MAX_TOKENS:  # without usage, the estimates say so (no_usage)
            return said.count(n, name, mismatch=why, disagreed=against)
    if local is None:
        return said.count(events, EVENT_FLOOR, mismatch=why, disagreed=against)
    if local <= events * (1 + USAGE_RATIO_TOLERANCE):  # about one token per event
        return said.count(events, EVENTS, mismatch=why, backed_by=(LOCAL,), disagreed=against)
    return said.count(round(max(local, events)), LOCAL, mismatch=why, disagreed=against)


def agree(a: float, b: float) -> bool:
    """Two token counts agree within USAGE_RATIO_TOLERANCE or USAGE_ABS_TOLERANCE tokens."""
    return abs(a - b) <= max(USAGE_ABS_TOLERANCE, USAGE_RATIO_TOLERANCE * max(a, b))
