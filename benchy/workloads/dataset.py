"""Datasets of real prompts (--dataset FILE): read offline, before anything is sent.

Word salad measures a server on text nobody sends: speculative decoding's acceptance, MoE
routing and natural answer lengths all depend on the text. A dataset gives benchy real prompts,
used three ways by the flags beside it (docs/datasets.md):

  natural        --dataset FILE alone: each sampled entry's prompt as it is; its output length
                 from the entry's reference answer (as vLLM's sharegpt benchmark does), or --tg
  fitted         --dataset FILE --pp N…: real text cut to each sweep length (cut_entries, fit_text)
  conversations  --dataset FILE --turns T: the entries' user messages as the turns of a
                 conversation, the server's own answers in the history

Formats, by the file's ending (a folder is a Hugging Face `save_to_disk` folder):
  .json              ShareGPT: a list of {"conversations": [{"from": "human"|"gpt", "value"}]}
                     (or any of the JSONL objects below, in a list)
  .jsonl             one object a line: {"prompt"} (with "completion" / "response" / "answer" /
                     "output" as its reference answer), {"text"}, OpenAI {"messages": [{role,
                     content}]} or ShareGPT {"conversations": [...]}
  .csv               a column prompt / text / question / instruction / input (the first found),
                     and an answer column like the JSONL keys
  .parquet, .arrow   rows shaped like the JSONL objects (pyarrow: `pip install 'benchy[datasets]'`)

Every error is one line naming the file (and the line, where there is one). The shipped sample
(`--dataset sample`, benchy/data/sample_dataset.json) is written by the project
(benchy/workloads/dataset_sample.py), so demos and tests run offline.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from benchy.jsontypes import JsonObject, Saved
from benchy.workloads import dataset_images
from benchy.workloads.spec import WorkloadError

SAMPLE_NAME = "sample"
SAMPLE_FILE = "data/sample_dataset.json"
MODES = ("natural", "fitted", "conversations")

_USER_ROLES = {"human": "user", "user": "user", "system": "system"}
_ASSISTANT_ROLES = {"gpt", "assistant", "chatgpt", "bard", "bing", "model"}
_PROMPT_KEYS = ("prompt", "text", "question", "instruction", "input")
_ANSWER_KEYS = ("completion", "response", "answer", "output")


@dataclass(frozen=True)
class Entry:
    """One dataset entry as (role, text) turns, role "system", "user" or "assistant"."""

    turns: tuple[tuple[str, str], ...]
    # ShareGPT-4V / LLaVA `image` (or `images`): each a data URL, or a file's absolute path (the
    # file's own path resolved against the dataset's folder), sent with the first user message
    images: tuple[str, ...] = ()

    @property
    def prompt(self) -> str:
        """The first user message: the natural and fitted modes' text."""
        return next(text for role, text in self.turns if role == "user")

    @property
    def answer(self) -> str | None:
        """The reference answer to the first user message, if the entry has one."""
        seen_user = False
        for role, text in self.turns:
            if seen_user and role == "assistant":
                return text
            seen_user = seen_user or role == "user"
        return None

    @property
    def user_messages(self) -> list[str]:
        return [text for role, text in self.turns if role == "user"]


@dataclass(frozen=True)
class Dataset:
    name: str  # as the user gave it ("sample" for the shipped one)
    sha256: str  # of the file's bytes (a folder: of its data files in order)
    format: str  # sharegpt-json | jsonl | csv | parquet | arrow
    entries: tuple[Entry, ...]
    skipped_empty: int = 0  # entries with no user text


@dataclass(frozen=True)
class DatasetSpec:
    """What a case takes from a dataset: the file, the mode, the length filters (prompt tokens
    as the server counts them, estimated), and the server's context (set once the server is
    known: entries that cannot fit are skipped, never sent). Sampling is seeded by --seed."""

    path: str
    mode: str = "natural"
    min_tokens: int | None = None
    max_tokens: int | None = None
    entries: int = 0  # usable entries in the file (known when the case is made)
    images: bool = False  # some entries carry images (ShareGPT-4V / LLaVA; dataset_images.py)
    turns: int | None = None  # conversations: only entries of at least this many user messages
    context: int | None = field(default=None, compare=False)
    # The dataset text's own calibration (server tokens = scale × o200k + overhead), fitted on
    # two prompts of it once the server is known; None: the run's (the filler's)
    text_fit: tuple[float, float] | None = field(default=None, compare=False)  # (overhead, scale)
    # fitted: bodies cut before the case by an exact source (load/dataset_fit.py), (start entry,
    # body tokens) → text, and that source's name; None: cut on the o200k estimate
    bodies: dict[tuple[int, int], str] | None = field(default=None, compare=False, repr=False)
    lengths: str | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.path.replace("\\", "/").rsplit("/", 1)[-1]

    def to_dict(self) -> JsonObject:
        return {
            "path": self.path,
            "mode": self.mode,
            "min_tokens": self.min_tokens,
            "max_tokens": self.max_tokens,
        }


def dataset_path(name: str) -> Path:
    if name == SAMPLE_NAME:
        return Path(str(resources.files("benchy").joinpath(SAMPLE_FILE)))
    return Path(name)


_CACHE: dict[tuple[str | int, ...], Dataset] = {}


def load(name: str) -> Dataset:
    """The dataset's usable entries (each with a user message), read once per process and
    file version (every case and worker of a run takes its prompts from the same read)."""
    path = dataset_path(name)
    try:
        stat = path.stat()
        key: tuple[str | int, ...] = (name, stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = (name,)
    if key not in _CACHE:
        _CACHE[key] = _load(name)
    return _CACHE[key]


def _load(name: str) -> Dataset:
    path = dataset_path(name)
    if not path.exists():
        raise WorkloadError(f"dataset not found: {name}")
    suffix = path.suffix.lower()
    try:
        if path.is_dir():
            files = sorted(path.glob("*.arrow")) or sorted(path.glob("*.parquet"))
            if not files:
                raise WorkloadError(f"dataset {name}: a folder must hold .arrow or .parquet files (save_to_disk)")
            rows = [row for f in files for row in _table_rows(name, f)]
            digest = _sha256(files)
            fmt = "arrow" if files[0].suffix == ".arrow" else "parquet"
        else:
            digest = _sha256([path])
            if suffix in (".parquet", ".arrow"):
                rows, fmt = list(_table_rows(name, path)), suffix[1:]
            else:
                text = path.read_text(encoding="utf-8")
                rows, fmt = _text_rows(name, suffix, text)
    except OSError as exc:
        raise WorkloadError(f"dataset {name}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"dataset {name}: not UTF-8 text (byte {exc.start})") from None
    entries, empty = [], 0
    for where, row in rows:
        entry = parse_entry(f"dataset {name}{where}", row)
        if entry is None:
            empty += 1
        else:
            turns, images = dataset_images.resolve(f"dataset {name}{where}", entry.turns, row, path.parent)
            entries.append(Entry(turns, images) if images else entry)
    if not entries:
        raise WorkloadError(f"dataset {name} holds no entry with a user prompt")
    return Dataset(name, digest, fmt, tuple(entries), empty)


def _sha256(files: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()


Rows = list[tuple[str, object]]  # (":line" or "", the raw row)


def _text_rows(name: str, suffix: str, text: str) -> tuple[Rows, str]:
    if suffix == ".csv":
        return _csv_rows(name, text), "csv"
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg == "Extra data":  # JSON Lines saved as .json: read as what it is
                return _text_rows(name, ".jsonl", text)
            raise WorkloadError(f"dataset {name}: not JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(data, list):
            raise WorkloadError(f"dataset {name}: a .json dataset must be a list of entries (ShareGPT)")
        return [(f"[{i}]", row) for i, row in enumerate(data)], "sharegpt-json"
    if suffix == ".jsonl":
        rows: Rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((f":{number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise WorkloadError(f"dataset {name}:{number}: not JSON ({exc.msg})") from None
        return rows, "jsonl"
    raise WorkloadError(
        f"dataset {name}: unknown format {suffix or '(no ending)'}: use .json, .jsonl, .csv, .parquet or .arrow"
    )


def _csv_rows(name: str, text: str) -> Rows:
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))  # a prompt may be longer than 128 kB
    reader = csv.DictReader(io.StringIO(text))
    try:
        fields = reader.fieldnames or []
    except csv.Error as exc:
        raise WorkloadError(f"dataset {name}: not CSV ({exc})") from None
    prompt = next((k for k in _PROMPT_KEYS if k in fields), None)
    if prompt is None:
        raise WorkloadError(f"dataset {name}: a CSV dataset needs a column named one of {', '.join(_PROMPT_KEYS)}")
    answer = next((k for k in _ANSWER_KEYS if k in fields), None)
    try:
        return [
            (f":{n}", {"prompt": row[prompt], **({"completion": row[answer]} if answer else {})})
            for n, row in enumerate(reader, 2)
        ]
    except csv.Error as exc:
        raise WorkloadError(f"dataset {name}:{reader.line_num}: not CSV ({exc})") from None


def _table_rows(name: str, path: Path) -> Iterator[tuple[str, object]]:
    """Rows of a Parquet file, or of an Arrow file as Hugging Face `datasets` writes it (the
    IPC stream format; the file format is read too). pyarrow is imported only here."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise WorkloadError(
            f"dataset {name}: reading {path.suffix} needs pyarrow: pip install 'benchy[datasets]'"
        ) from None
    try:
        if path.suffix.lower() == ".parquet":
            table = pq.read_table(path)
        else:
            with pa.memory_map(str(path)) as source:
                try:
                    table = pa.ipc.open_stream(source).read_all()
                except pa.ArrowInvalid:
                    table = pa.ipc.open_file(source).read_all()
    except (pa.ArrowException, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise WorkloadError(f"dataset {name}: cannot read {path.name}: {first}") from None
    for i, row in enumerate(table.to_pylist()):
        yield f"[{i}]", row


def parse_entry(where: str, row: object) -> Entry | None:
    """An entry from one row in any of the shapes above; None for one without user text;
    WorkloadError (one line, `where` first) for a row of no known shape."""
    if not isinstance(row, dict):
        raise WorkloadError(f"{where}: expected an object, got {type(row).__name__}")
    turns: list[tuple[str, str]] = []
    if "conversations" in row or "messages" in row:
        key = "conversations" if "conversations" in row else "messages"
        messages = row[key]
        if not isinstance(messages, list):
            raise WorkloadError(f"{where}: {key} must be a list of messages")
        for message in messages:
            turn = _message(where, key, message)
            if turn is not None:
                turns.append(turn)
    else:
        prompt_key = next((k for k in _PROMPT_KEYS if k in row), None)
        if prompt_key is None:
            keys = ", ".join(["conversations", "messages", *_PROMPT_KEYS])
            raise WorkloadError(f"{where}: no prompt: expected one of the keys {keys}")
        prompt = row[prompt_key]
        if prompt is not None and not isinstance(prompt, str):
            raise WorkloadError(f"{where}: {prompt_key} must be text, got {type(prompt).__name__}")
        turns.append(("user", prompt or ""))
        answer = next((row[k] for k in _ANSWER_KEYS if isinstance(row.get(k), str) and row[k]), None)
        if answer:
            turns.append(("assistant", answer))
    turns = [(role, text) for role, text in turns if text.strip()]
    if not any(role == "user" for role, _ in turns):
        return None
    return Entry(tuple(turns))


def _message(where: str, key: str, message: object) -> tuple[str, str] | None:
    """(role, text) of a ShareGPT {from, value} or OpenAI {role, content} message; None for a
    role benchy does not send (tools, functions)."""
    if not isinstance(message, dict):
        raise WorkloadError(f"{where}: each of {key} must be an object with a role and its text")
    role = message.get("from", message.get("role"))
    content = message.get("value", message.get("content"))
    if not isinstance(role, str):
        raise WorkloadError(f"{where}: a message of {key} has no role (`from` or `role`)")
    if isinstance(content, list):  # OpenAI content parts: the text ones, in order
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    if content is not None and not isinstance(content, str):
        raise WorkloadError(f"{where}: a message's text must be a string, got {type(content).__name__}")
    role = role.lower()
    if role in _ASSISTANT_ROLES:
        return "assistant", content or ""
    if role in _USER_ROLES:
        return _USER_ROLES[role], content or ""
    return None


# ------------------------------------------------------------------ sampling and fitting


@dataclass(frozen=True, slots=True)
class DatasetSampling(Saved):
    """What one case's seeded draw sent and left out."""

    sampled: int  # entries sent (past `eligible` the draw starts over)
    examined: int  # entries the seeded draw looked at (the whole file only when it had to)
    eligible: int  # of those, the ones within the length filters that fit the context
    skipped_by_filter: int  # outside --dataset-min-tokens / --dataset-max-tokens
    skipped_over_context: int  # prompt and output longer than the server's context: never sent


@dataclass(frozen=True, slots=True)
class DatasetSetup(Saved):
    """(1.14) --dataset: the file, how it was used, and each case's sampling."""

    name: str
    path: str
    sha256: str  # of the file's bytes (a save_to_disk folder: its data files in order)
    format: str  # sharegpt-json | jsonl | csv | parquet | arrow
    entries: int  # entries with a user prompt
    entries_without_prompt: int
    mode: str  # natural | fitted | conversations
    seed: int  # --seed of the sampling
    min_tokens: int | None = None
    max_tokens: int | None = None
    context: int | None = None  # the server's context, entries over which were skipped
    text_overhead_tokens: float | None = None  # the dataset text's calibration (the run's is the filler's)
    text_scale: float | None = None  # server tokens per o200k token of the dataset's text
    sampling: dict[str, DatasetSampling] = field(default_factory=dict)  # case label → its draw
    # (1.20) fitted: case label → how its cuts were counted (evidence.LENGTH_METHODS)
    lengths: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Selection:
    """The entries a case sends, in order, and what the sampling looked at and left out."""

    entries: list[Entry]
    prompt_tokens: list[int]  # each entry's prompt as the server is expected to count it
    examined: int  # entries the draw looked at (all of them when fewer are eligible than sent)
    eligible: int  # of those, the ones within the length filters that fit the context
    skipped_by_filter: int
    skipped_over_context: int

    def sampling(self) -> DatasetSampling:
        return DatasetSampling(
            len(self.entries), self.examined, self.eligible, self.skipped_by_filter, self.skipped_over_context
        )


def select(
    spec: DatasetSpec,
    n: int,
    seed: int,
    prompt_tokens: Callable[[str], int],
    output_tokens: Callable[[Entry], int] = lambda e: 0,
) -> Selection:
    """`n` entries drawn with `seed` (without replacement) from those within the length
    filters whose prompt and output fit the server's context: the entries are looked at in a
    seeded random order until `n` pass, so a file of 100,000 conversations costs the count of
    what is sent, not of all of it. Fewer eligible than `n`: every one is looked at, and the
    draw goes on over the eligible ones, reshuffled. `prompt_tokens` estimates the server's
    count of a prompt."""
    data = load(spec.path)
    entries = [e for e in data.entries if len(e.user_messages) >= spec.turns] if spec.turns else data.entries
    rng = np.random.default_rng(seed)
    kept: list[tuple[Entry, int]] = []
    by_filter = over = examined = 0
    for i in rng.permutation(len(entries)):
        if len(kept) >= n:
            break
        entry, examined = entries[int(i)], examined + 1
        tokens = prompt_tokens(entry.prompt)
        if (spec.min_tokens and tokens < spec.min_tokens) or (spec.max_tokens and tokens > spec.max_tokens):
            by_filter += 1
        elif spec.context and tokens + output_tokens(entry) >= spec.context:
            over += 1
        else:
            kept.append((entry, tokens))
    if not kept:
        raise WorkloadError(
            f"dataset {spec.path}: no entry is left to send ({by_filter} outside the length filters, "
            f"{over} longer than the server's context)"
        )
    chosen = list(kept)
    while len(chosen) < n:  # fewer eligible than asked: again over them, reshuffled
        chosen.extend(kept[int(i)] for i in rng.permutation(len(kept)))
    chosen = chosen[:n]
    return Selection([e for e, _ in chosen], [t for _, t in chosen], examined, len(kept), by_filter, over)


NEAR_CUT_CHARS = 8  # how far before a cut one short fit_text looks for an exact prefix


def fit_text(text: str, tokens: int, count: Callable[[str], int], head: str = "") -> str:
    """A prefix of `text` that makes `head + prefix` `tokens` tokens by `count` (any counter:
    benchy's calibrated o200k count, or the server's own), at most that where no prefix makes
    it exactly. Cut on a character, not a word, so the count lands on `tokens` wherever one
    more character adds at most one token. Each count costs a pass over the prompt, so few are
    made: a guess from the text's characters per token, two corrections by the rate seen, then
    a bisection of the bracket left (about 8 counts for any length, not log2 of the characters).
    ValueError when even the whole text is shorter."""
    full = count(head + text)
    if full < tokens:
        raise ValueError(f"the text is shorter than {tokens} tokens")
    base = count(head)
    if base >= tokens:
        return ""
    lo, hi = 0, len(text)  # count(head + text[:lo]) <= tokens < count(head + text[:hi]), or hi is the end
    at, counted = hi, full
    for _ in range(3):  # secant steps from the end: the tokens per character seen so far
        rate = (counted - base) / at if at else 1.0
        guess = round((tokens - base) / rate) if rate > 0 else lo + 1
        guess = min(max(guess, lo + 1), hi - 1)
        if hi - lo <= 1 or guess in (lo, hi):
            break
        c = count(head + text[:guess])
        if c <= tokens:
            lo = guess
        else:
            hi = guess
        at, counted = guess, c
        if c == tokens:
            break
    step = 4  # gallop up from an exact or low point, so the cut is not short of the tokens
    while hi - lo > 1 and lo + step < hi and count(head + text[: lo + step]) <= tokens:
        lo, step = lo + step, step * 2
    hi = min(hi, lo + step)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(head + text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid
    cut = hi if count(head + text[:hi]) <= tokens else lo
    # A count is not monotonic in characters (one more can merge two tokens into one), so a cut
    # one short may have an exact prefix a few characters before it: look there, briefly.
    if count(head + text[:cut]) < tokens:
        for shorter in range(cut - 1, max(0, cut - NEAR_CUT_CHARS), -1):
            if count(head + text[:shorter]) == tokens:
                return text[:shorter]
    return topped_up(text[:cut], tokens, count, head)


# One more character can add several tokens (a byte-level vocabulary that never merged a script:
# a CJK character 3, an emoji 4), so no prefix may land on the target. The prefix that stops
# short is topped up with ASCII punctuation, a piece kept only where it adds exactly one token
# (issue 52); where none does, it stays short and the caller's count names the miss.
PAD_PIECES = (".", ",", "-", ":", ";", "!", "?", "a", "x")


def topped_up(prefix: str, tokens: int, count: Callable[[str], int], head: str = "") -> str:
    """`prefix` and as few PAD_PIECES as make `head + prefix` `tokens` tokens by `count`, each
    adding exactly one; fewer where no piece adds one (never more than `tokens`). A prefix that
    ends in whitespace (which a piece after it may join) is tried without it too."""
    best = prefix
    for base in dict.fromkeys((prefix, prefix.rstrip())):
        padded, have = base, count(head + base)
        while have < tokens:
            piece = next((p for p in PAD_PIECES if count(head + padded + p) == have + 1), None)
            if piece is None:
                break
            padded, have = padded + piece, have + 1
        if have == tokens:
            return padded
    return best


JOIN = "\n\n"  # after each entry's text in a fitted prompt


def cut_entries(
    texts: Sequence[str],
    start: int,
    tokens: int,
    count: Callable[[str], int],
    head: str = "",
    counted: dict[int, int] | None = None,
) -> str:
    """Texts from `start` on (wrapping), each followed by a blank line, cut so that `head` and
    they make `tokens` tokens by `count`: whole texts while they fit by the count of each with
    its blank line (counted once, kept in `counted` for the next prompt: a join can merge with
    the text before it, ".\n\n" is one o200k token), then the next one cut by fit_text, the
    whole counted once to check. Where the pieces do not add up (a counter that merges across
    a join's far side) the joined text is cut whole by fit_text: slower, as exact."""
    counted = {} if counted is None else counted

    def unit(i: int) -> int:
        k = i % len(texts)
        if k not in counted:
            counted[k] = count(texts[k] + JOIN)
        return counted[k]

    pieces: list[str] = []
    used, i = count(head), start
    lap = used  # the count when the texts last wrapped: a lap that adds nothing never ends
    while used + unit(i) <= tokens:
        used += unit(i)
        pieces.append(texts[i % len(texts)] + JOIN)
        i += 1
        if (i - start) % len(texts) == 0:
            if used == lap:
                raise _never_reached(start, tokens, used)
            lap = used
    left = tokens - used
    try:
        tail = fit_text(texts[i % len(texts)], left, count) if left > 0 else ""
    except ValueError:  # short of `left` alone, over it with its blank line: the slow way below
        tail = texts[i % len(texts)]
    body = "".join(pieces) + tail
    if count(head + body) == tokens:
        return body
    chars, size, reached = 6 * tokens + 256, 0, -1
    while True:  # the slow, exact way: the joined text cut whole
        joined, size, k = [], 0, start
        while size < chars:
            joined.append(texts[k % len(texts)])
            size, k = size + len(joined[-1]) + len(JOIN), k + 1
        try:
            return fit_text(JOIN.join(joined), tokens, count, head=head)
        except ValueError:  # text of more than 6 characters a token: take more of it
            chars *= 2
        if k - start > len(texts):  # a whole lap held: a doubling that adds no token never ends
            got = count(head + JOIN.join(joined))
            if got <= reached:
                raise _never_reached(start, tokens, got) from None
            reached = got


def _never_reached(start: int, tokens: int, got: int) -> ValueError:
    """Texts that add no token however often they wrap (whitespace under a vocabulary that
    merges its runs, or counts it as nothing): no cut makes the length, so none is tried."""
    return ValueError(
        f"the texts from entry {start} on never make {tokens} tokens: they stop at {got} however often"
        " they are repeated (whitespace only?)"
    )
