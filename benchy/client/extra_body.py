"""`--extra-body JSON` (or `@file.json`): fields merged into every request body — sampling
parameters, `chat_template_kwargs` (`enable_thinking`), `response_format`, a vendor's own
options — after benchy's own, on every endpoint. (A LoRA adapter is served under a model name
of its own: pass it as --model.)

Refused (one line, exit 2): anything but a JSON object, and a field benchy sets itself (the
prompt, the output length, streaming, the exact-length options, stops): a figure measured
with them changed would not be the one benchy says it measured. Each has its own flag.

Secrets: a key named like a credential (`api_key`, `token`, `secret`, `password`, `auth`…),
at any depth, is sent as given but kept as `***` in results.json and the saved command line,
and its value is scrubbed from every message benchy keeps (client/redact.py). Kept light (no
aiohttp): the CLI imports it to redact its own command line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# Fields benchy sets on some endpoint, and the flag that sets each instead.
OWNED = {
    "model": "--model",
    "messages": "--pp and the workload flags",
    "prompt": "--pp and the workload flags",
    "input": "--pp and the workload flags",
    "max_tokens": "--tg",
    "max_completion_tokens": "--tg",
    "max_output_tokens": "--tg",
    "min_tokens": "--tg",
    "ignore_eos": "--tg (benchy asks for exactly that many tokens)",
    "stream": "(benchy streams every request)",
    "stream_options": "(benchy asks for usage in the stream)",
    "stop": "--stop",
    "stop_sequences": "--stop",
}
# A credential's name, as words of a key (snake, kebab, dotted or camelCase).
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "auth", "authorization"}
    | {"credential", "credentials", "bearer", "sig", "signature", "cookie", "session"}
)
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


class ExtraBodyError(ValueError):
    """A bad --extra-body; the message is one line."""


def load(text: str) -> dict[str, Any]:
    """The object `--extra-body` names: JSON text, or `@path` to a JSON file."""
    where = "--extra-body"
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        where = f"--extra-body {text}"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ExtraBodyError(f"{where}: cannot read it ({exc.strerror or type(exc).__name__})") from None
        except UnicodeDecodeError:
            raise ExtraBodyError(f"{where}: cannot read it (not UTF-8)") from None
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ExtraBodyError(f"{where} is not valid JSON: {str(exc).splitlines()[0]}") from None
    return check(body, where)


def check(body: object, where: str = "--extra-body") -> dict[str, Any]:
    """`body` if it is an object that sets no field benchy owns; ExtraBodyError (one line) else."""
    if not isinstance(body, dict):
        raise ExtraBodyError(f'{where} must be a JSON object ({{"name": value, …}}), not {type(body).__name__}')
    owned = [name for name in body if name in OWNED]
    if owned:
        name = owned[0]
        raise ExtraBodyError(f"{where} sets {name!r}, which benchy sets itself: use {OWNED[name]}")
    return body


def is_secret(name: str) -> bool:
    """Whether a key is named like a credential (`api_key`, `X-Api-Key`, `accessToken`)."""
    words = [w.lower() for w in _WORD.findall(name)]
    joined = "".join(words)
    return any(w in _SECRET_WORDS for w in words) or "apikey" in joined or "accesstoken" in joined


def redacted(body: object) -> object:
    """`body` with the value of every credential-named key, at any depth, as ***."""
    if isinstance(body, dict):
        return {k: "***" if is_secret(str(k)) else redacted(v) for k, v in body.items()}
    if isinstance(body, list):
        return [redacted(v) for v in body]
    return body


def secrets(body: object) -> list[str]:
    """The values of credential-named keys (their leaves as text), for scrubbing messages."""
    found: list[str] = []
    if isinstance(body, dict):
        for k, v in body.items():
            found += _leaves(v) if is_secret(str(k)) else secrets(v)
    elif isinstance(body, list):
        for v in body:
            found += secrets(v)
    return found


def _leaves(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def redacted_argument(value: str) -> str:
    """An `--extra-body` value as the saved command line shows it: a file name as given, JSON
    with its credential-named values as ***, anything else (it will be refused) as ***."""
    if value.startswith("@"):
        return value
    try:
        return json.dumps(redacted(json.loads(value)), separators=(",", ":"))
    except ValueError:
        return "***"


def redacted_body(body: dict[str, Any] | None) -> dict[str, Any] | None:
    """What results.json keeps of --extra-body (None: none was given)."""
    if body is None:
        return None
    kept = redacted(body)
    assert isinstance(kept, dict)
    return kept


def check_cases(cases: list[Any]) -> None:
    """ExtraBodyError (one line, naming the scenario) for a case whose scenario's extra_body
    sets a field benchy sets itself (workloads.case.Case.extra_fields)."""
    for case in cases:
        if case.extra_body:
            check(case.extra_fields(), f"scenario {case.scenario or '?'}: extra_body")
