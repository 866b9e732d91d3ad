"""Prompts of exact token counts, each starting with a nonce so no prefix cache can serve it.

The nonce is eight of the commonest English words picked by a hash of a random per-invocation
salt and a counter: unique within the run and, by the salt, against every earlier run (32^7
hashed choices after a first word that steps with the counter, so any 32 consecutive requests
differ at their very first token; a plain "salt-counter" would share the salt's tokens, enough
to fill a 16-token cache block). Words rather than hex digits because every
tokenizer splits a hex string differently from one nonce to the next, which would make the
prompt length wobble by several tokens on a server whose tokenizer is not o200k; common words
are one token each nearly everywhere. The nonce comes first, so two requests share no prefix
beyond what the server's chat template puts before the user's text.

The body after the nonce is each request's own too (words drawn from a hash of the salt, the
counter and the part), not one filler behind every nonce: a server that reuses cached blocks
wherever they sit in a prompt (position-independent reuse, KV shared by content) would
otherwise serve nearly all of a "cold" prompt from cache, and say so or not. Only what a
workload means to share is shared: a --depth cached context, a shared prefix, a conversation's
history, a trace's equal block ids.

Lengths are counted with benchy's offline o200k_base tokenizer, then calibrated against the
server's own count: the server sees `scale × local + overhead` tokens, where overhead is the
chat template and scale absorbs a different tokenizer. Two calibration requests (short and
long, each with its own nonce) fit both. Where the server's tokenizer can be asked (its
/tokenize, --tokenizer, or its usage of tiny requests), the words are first cut to those that
are one token there
(lengths.fit_words): every word is then one token on both sides, the scale is 1 and each
prompt is exactly its target; otherwise the o200k estimate stands (within a few % on an
English BPE, more on a vocabulary that splits common words).
A third (`check_length`), at the run's longest prompt, catches a server that keeps only the
last N tokens of a prompt (Ollama's num_ctx, truncate_prompt_tokens, context shifting) before
any figure is measured on a prompt it never read.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import struct
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from benchy.client import harmony
from benchy.load.calibration import CALIBRATION_LOCAL_TOKENS, OUTPUT_CALIBRATION_TOKENS, LengthCheck
from benchy.load.calibration import Calibration as Calibration  # where the load stage's modules find these
from benchy.load.calibration import PromptError as PromptError
from benchy.load.lengths import PromptLengths
from benchy.measure import tokenizer
from benchy.measure.evidence import prompt_length_missed

if TYPE_CHECKING:
    from benchy.client.client import Client

# Between a shared context and what follows it: a piece of its own, so the context's last
# token is the same whether the context is sent alone or with a request after it.
CONTEXT_SEPARATOR = "\n\n"


TEMPLATES = ("none", "harmony")


@dataclass(frozen=True)
class Template:
    """How benchy itself wraps a /v1/completions prompt (--template) and which request options
    go with it. The chat endpoint always gets the bare text: the server applies its own template.

    harmony: gpt-oss's format (harmony.render_prompt), reasoning effort in the system message,
    and `skip_special_tokens: false` so that the channel markers reach benchy (servers drop
    them by default), whose client then splits the stream into analysis and final.
    """

    name: str = "none"
    reasoning_effort: str | None = None  # None: the server's (or the template's) default

    def parses(self, endpoint: str) -> bool:
        """Whether the completion text is Harmony that benchy must split into channels."""
        return self.name == "harmony" and endpoint == "completions"

    def render(self, text: str, endpoint: str) -> str:
        if not self.parses(endpoint):
            return text
        return harmony.render_prompt(text, reasoning_effort=self.reasoning_effort or "medium")

    def request_options(self, endpoint: str) -> dict[str, Any]:
        if endpoint in ("chat", "responses"):  # the Responses client sends it as reasoning.effort
            return {"reasoning_effort": self.reasoning_effort} if self.reasoning_effort else {}
        return {"skip_special_tokens": False} if self.parses(endpoint) else {}

    def check(self, endpoints: set[str], stops: tuple[str, ...] | list[str]) -> None:
        """ValueError (one line) for a template, effort or stop string the run's endpoints cannot use."""
        if self.name == "harmony" and "completions" not in endpoints:
            raise ValueError(
                "--template harmony is for --endpoint completions: the chat endpoint applies the server's own template"
            )
        if self.reasoning_effort and self.name == "none" and not endpoints & {"chat", "responses"}:
            raise ValueError(
                "--reasoning-effort with --endpoint completions needs --template harmony: a raw prompt has no place for it"
                if "completions" in endpoints
                else "--reasoning-effort needs --endpoint chat or responses: Anthropic's Messages API has no such field"
            )
        if any(not s for s in stops):
            raise ValueError("--stop strings must not be empty")

    def risky_stops(self, stops: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
        """(stop, reason) for stop strings that fire inside a Harmony response: all that
        harmony.dangerous_stops finds under this template, else those that look like markers
        (a plain word such as "final" is harmless to other models)."""
        return [
            (stop, reason)
            for stop, reason in harmony.dangerous_stops(list(stops))
            if self.name == "harmony" or "<|" in stop
        ]


def exact_length_options(tg: int) -> dict[str, Any]:
    """Ask for exactly tg tokens: servers differ in which of these they honour."""
    return {"ignore_eos": True, "min_tokens": tg}


@dataclass(frozen=True)
class Prompt:
    text: str
    nonce: str | None
    local_tokens: int
    # Local tokens of the part no other prompt shares: after a shared context, the nonce-led
    # rest; otherwise the whole prompt (None: not known, e.g. a trace's blocks).
    unique_local_tokens: int | None = None


class PromptFactory:
    def __init__(self, calibration: Calibration = Calibration(), nonce: bool = True, salt: str | None = None) -> None:
        self.calibration = calibration
        self.nonce = nonce
        self.salt = salt or secrets.token_hex(6)
        self._counter = 0
        self._first_word_offset = hashlib.blake2b(self.salt.encode(), digest_size=1).digest()[0]

    def next_nonce(self) -> str:
        self._counter += 1
        digest = hashlib.blake2b(f"{self.salt}-{self._counter}".encode(), digest_size=16).digest()
        spaced = _spaced_list(self.calibration.length_source.nonce_words or tokenizer.nonce_words())
        # The first word steps with the counter, so consecutive requests differ at their very
        # first token (a token-level cache like llama.cpp's would otherwise reuse a shared
        # first word); the other seven come from the hash. A leading space keeps every word
        # the same single token.
        n = len(spaced)
        first = spaced[(self._first_word_offset + self._counter) % n]
        return first + "".join([spaced[i % n] for i in _SEVEN_U16(digest, 2)])

    def build(self, server_tokens: int, depth: int = 0, context: Prompt | None = None) -> Prompt:
        """A prompt the server will count as about `depth + server_tokens` tokens: `depth`
        tokens of context, then the pp part. With `context` (cached mode, from `context()`)
        the prompt starts with that shared text; otherwise with this request's nonce."""
        local = self.calibration.local_tokens_for(depth + server_tokens)
        nonce = self.next_nonce() if self.nonce else None
        head = nonce or ""
        if context is not None:
            head = context.text + CONTEXT_SEPARATOR + head
        elif depth:
            head += self._own_text("depth", self._context_local(depth))
        head_tokens = tokenizer.count(head) if head else 0
        body = local - head_tokens
        if body < 1:
            raise PromptError(
                f"a {server_tokens}-token prompt is too short: the chat template and nonce "
                f"alone take about {server_tokens - body} tokens"
            )
        text = head + self._body(body)
        total = head_tokens + body  # the body's words: one token each, a piece each
        unique = (tokenizer.count(nonce) if nonce else 0) + body if context is not None else total
        return Prompt(text=text, nonce=nonce, local_tokens=total, unique_local_tokens=unique)

    def unique_tokens(self, prompt: Prompt) -> int:
        """The server tokens of the part of `prompt` no other prompt shares (a record's
        unique_tokens, which leakage is judged by): its local count × the scale, the
        filler's words being fitted to the server's vocabulary."""
        return round((prompt.unique_local_tokens or prompt.local_tokens) * self.calibration.scale)

    def context(self, depth: int) -> Prompt:
        """The shared context of a cached-depth case: about `depth` server tokens, led by its
        own nonce even under --no-nonce, so that no other run's prompt can share its prefix."""
        nonce = self.next_nonce()
        body = self._context_local(depth) - tokenizer.count(nonce)
        if body < 1:
            raise PromptError(f"--depth {depth} is too short for a context led by its own nonce")
        text = nonce + self._own_text("context", body)
        return Prompt(text=text, nonce=nonce, local_tokens=tokenizer.count(text))

    def message(self, server_tokens: int) -> Prompt:
        """One user message of a conversation turn: about `server_tokens` server tokens, led by
        this request's nonce (unless --no-nonce), so no cache holds any of it before it is sent.
        The chat template's overhead is the conversation's, so only the scale applies."""
        local = max(1, round(server_tokens / self.calibration.scale))
        nonce = self.next_nonce() if self.nonce else None
        body = local - (tokenizer.count(nonce) if nonce else 0)
        if body < 1:
            raise PromptError(f"a {server_tokens}-token message is too short for its nonce (8 tokens)")
        text = (nonce or "") + self._body(body)
        return Prompt(text=text, nonce=nonce, local_tokens=tokenizer.count(text))

    def blocks(self, block_ids: list[Any], server_tokens: int, block_tokens: int) -> Prompt:
        """A trace request's prompt: one text per block id, `block_tokens` server tokens each
        (the last one cut), about `server_tokens` in all with the chat template. Equal ids give
        identical blocks; the ids are salted with this invocation's salt, so different ids (and
        two invocations) never share a block. No nonce: the block ids say what is unique."""
        total = self.calibration.local_tokens_for(server_tokens)
        if total < 1:
            raise PromptError(f"a {server_tokens}-token trace request is shorter than the chat template")
        per_block = max(1, round(block_tokens / self.calibration.scale))
        pieces, left = [], total
        for block_id in block_ids:
            if left <= 0:
                break
            pieces.append(self._block(block_id, min(per_block, left)))
            left -= per_block
        if left > 0:  # more tokens than the ids cover: the rest is this request's own
            pieces.append(self._block(("own", self.next_nonce()), left))
        text = "".join(pieces)
        return Prompt(text=text, nonce=None, local_tokens=total)

    def _body(self, tokens: int) -> str:
        """The text after the nonce: this request's own (see _own_text); without a nonce
        every request gets the same text, which is what --no-nonce shows."""
        if self.nonce:
            return self._own_text("body", tokens)
        words = self.calibration.length_source.one_token
        return block_text("filler", tokens, words) if words else tokenizer.filler(tokens, seed=0)

    def _own_text(self, part: str, tokens: int) -> str:
        """`tokens` words no other prompt holds: drawn from a hash of this invocation's salt,
        the request's counter and the part, so that a cache that reuses blocks wherever they sit
        (position-independent, by content) finds nothing of one request in any other's."""
        return block_text(f"{self.salt}/{part}/{self._counter}", tokens, self.calibration.length_source.one_token)

    def _block(self, block_id: object, tokens: int) -> str:
        return block_text(f"{self.salt}/{block_id!r}", tokens, self.calibration.length_source.one_token)

    def _context_local(self, depth: int) -> int:
        return round(depth / self.calibration.scale)

    def calibration_prompts(self) -> list[Prompt]:
        """A short and a long prompt for Calibration.fit, with their own nonces."""
        return [self._raw(n) for n in CALIBRATION_LOCAL_TOKENS]

    def _raw(self, local: int) -> Prompt:
        nonce = self.next_nonce()
        text = nonce + self._own_text("cal", local)  # the measured prompts' kind of text: same scale
        return Prompt(text=text, nonce=nonce, local_tokens=tokenizer.count(text))


def block_text(key: str, tokens: int, words: tuple[str, ...] | None = None) -> str:
    """`tokens` one-token words drawn from a hash of `key`: equal keys give equal text (a
    shorter one is a prefix of a longer one), different keys differ from the first few tokens
    on (100 words to choose from, or the server's one-token ones (lengths.fit_words), at least
    24: two blocks share no 16-token cache block)."""
    chosen = words or tokenizer.filler_words()
    # SHAKE-128 of the key, 4 bytes a word: an extendable output, so a shorter draw is a prefix
    # of a longer one, and one call however long (seeding a numpy generator a request cost more
    # than the rest of a short prompt). The modulo's bias is below 1e-6 for any word list.
    stream = hashlib.shake_128(key.encode()).digest(4 * tokens)
    if tokens <= SHORT_BLOCK:  # numpy's fixed cost is most of a short block's
        spaced = _spaced_list(chosen)
        n = len(spaced)
        return "".join([spaced[d % n] for d in struct.unpack(f">{tokens}I", stream)])
    array = _spaced(chosen)
    return "".join(array[np.frombuffer(stream, dtype=">u4") % len(array)].tolist())


SHORT_BLOCK = 64  # words: below this a Python loop draws them faster than numpy
_SEVEN_U16 = struct.Struct(">7H").unpack_from  # a nonce's seven hashed words, 2 bytes each


@functools.lru_cache(maxsize=8)
def _spaced_list(words: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(" " + w for w in words)


@functools.lru_cache(maxsize=8)
def _spaced(words: tuple[str, ...]) -> np.ndarray:
    """The words, each with its leading space, as an array a prompt's picks index at once (a
    Python loop over a 2,000-word prompt's words was most of its building time)."""
    return np.array(_spaced_list(words), dtype=object)


async def calibrate(
    client: Client, endpoint: str, salt: str, template: Template = Template(), lengths: PromptLengths = PromptLengths()
) -> Calibration:
    """Fits the server's token count of our prompts (chat template and tokenizer included; a
    client-side --template is rendered first, so its tokens count as overhead too). `client`:
    a benchy.client.client.Client (its usage_of sends a one-token request and returns the usage).
    With `lengths` fitted (words one server token each) the line is exact: scale 1, the
    template's tokens as overhead."""
    prompts = PromptFactory(Calibration(lengths=lengths), salt=f"{salt}cal{endpoint}").calibration_prompts()
    usages = [
        await client.usage_of(template.render(p.text, endpoint), endpoint, template.request_options(endpoint))
        for p in prompts
    ]
    fitted = replace(
        Calibration.fit(
            (prompts[0].local_tokens, prompts[1].local_tokens), (usages[0]["prompt_tokens"], usages[1]["prompt_tokens"])
        ),
        lengths=lengths,
    )
    found = await output_scale(client, endpoint, template.render(prompts[0].text, endpoint), template)
    return replace(fitted, output_scale=found[0], output_method=found[1], output_usage=found[2]) if found else fitted


OUTPUT_CALIBRATION_MIN_LOCAL = 16  # fewer local tokens of answer: too little text to take a ratio
OUTPUT_BY_MAX_TOKENS = "max_tokens"  # the calibration answer ended by length: its count is exact


async def output_scale(
    client: Client, endpoint: str, prompt: str, template: Template
) -> tuple[float, str, int | None] | None:
    """Server tokens per local token of an answer's text. The answer is asked for exactly
    OUTPUT_CALIBRATION_TOKENS, as the run asks; where it ended by length the server made that
    many, known without usage or re-tokenizing (OUTPUT_BY_MAX_TOKENS): the local count then
    estimates the tokens generated, a witness independent of both usage and the server's
    /tokenize (a random-weight model's text re-tokenizes to far fewer tokens than it made).
    Else the server's /tokenize of the text, else usage's completion count. A failure only
    leaves the prompts' scale in place (None): the local count is an estimate either way."""
    from benchy.client.errors import ServerError, TransientError  # not at import time (see check_length)

    options = {**exact_length_options(OUTPUT_CALIBRATION_TOKENS), **template.request_options(endpoint)}
    try:
        text, usage, finish = await client.answer_of(prompt, endpoint, OUTPUT_CALIBRATION_TOKENS, options)
    except (ServerError, TransientError):
        return None
    local = tokenizer.count(text)
    if local < OUTPUT_CALIBRATION_MIN_LOCAL:
        return None
    completion = usage.get("completion_tokens")
    claimed = completion if isinstance(completion, int) and completion > 0 else None
    if finish == "length":  # and what usage claimed of those known tokens (Calibration.usage_at_known)
        return OUTPUT_CALIBRATION_TOKENS / local, OUTPUT_BY_MAX_TOKENS, claimed
    counted = await client.server_token_count(text)
    if counted:
        return counted / local, "tokenize", None
    if claimed is not None:
        return claimed / local, "usage", None
    return None


async def check_length(
    client: Client, endpoint: str, calibration: Calibration, salt: str, longest: int, template: Template = Template()
) -> Calibration:
    """Sends the run's longest prompt once (one output token) when it is longer than the
    calibration prompts, and keeps what the server counted in `length_check`: a server that
    truncates prompts shows it here, before the run. A refusal (a prompt over the context) is
    kept in the server's words, not raised: the run's own requests will say the same."""
    if calibration.covers(longest):
        return calibration
    from benchy.client.errors import ServerError  # not at import time: workers load prompts without aiohttp use

    prompt = PromptFactory(calibration, salt=f"{salt}len{endpoint}").build(longest)
    options = template.request_options(endpoint)
    try:
        usage = await client.usage_of(template.render(prompt.text, endpoint), endpoint, options)
    except ServerError as exc:  # the server's own answer, one line
        return replace(calibration, length_check=LengthCheck(longest, error=str(exc)))
    counted = usage["prompt_tokens"]
    missed = prompt_length_missed(longest, counted, calibration.prompt_slack)
    return replace(calibration, length_check=LengthCheck(longest, counted, missed))
