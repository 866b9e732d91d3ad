"""What differs between two runs' setups that can explain a change between them.

`benchy compare` of a run on 4 slots against one on 1 showed only "Started (UTC)" in its setup
table, though the slots alone explain its figures. Here every setting benchy records that
changes what a server does or how benchy measured it: the engine and its version, the model and
its file (where the quantization usually shows: `…-Q4_K_M.gguf`), the context and the slots the
server reported, the host and its GPUs, the profile, the endpoint, the template and the flags
typed (less the output folder). Rows that are equal are left out; the start time comes last.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from benchy.results.types import RunResult

# Flags that name where results go, not what was measured: left out of the flags compared.
_OUTPUT_FLAGS = {"-o": 1, "--output": 1, "--force": 0, "-q": 0, "--quiet": 0, "--base-url": 1}


def flags(command_line: str | None) -> str | None:
    """The command line as typed, less the output folder and the server URL (a row of its own)."""
    if not command_line:
        return None
    try:
        words = shlex.split(command_line)
    except ValueError:
        return command_line
    kept, skip = [], 0
    for word in words:
        if skip:
            skip -= 1
            continue
        name = word.split("=", 1)[0]
        if name in _OUTPUT_FLAGS:
            skip = 0 if "=" in word else _OUTPUT_FLAGS[name]
            continue
        kept.append(word)
    return " ".join(kept)


def _server(r: RunResult, field: str) -> object:
    return getattr(r.setup.server, field) if r.setup.server is not None else None


def _gpus(r: RunResult) -> str | None:
    gpu = r.setup.gpu
    if gpu is None or not gpu.gpus:
        return None
    names = list(gpu.gpus.values())
    return ", ".join(f"{names.count(n)}× {n or 'unknown'}" for n in dict.fromkeys(names))


FIELDS: tuple[tuple[str, Callable[[RunResult], object]], ...] = (
    ("Engine", lambda r: r.setup.server.engine_version if r.setup.server is not None else None),
    ("Server version", lambda r: r.setup.server_version),
    ("Model", lambda r: r.setup.model),
    ("Model file", lambda r: _server(r, "model_path")),
    ("Context (tokens a request may hold)", lambda r: _server(r, "context_length")),
    ("Slots (requests run at once)", lambda r: _server(r, "slots")),
    ("Server", lambda r: r.setup.base_url),
    ("Host (benchy)", lambda r: r.setup.host),
    ("GPUs", _gpus),
    ("Hardware profile", lambda r: r.setup.hardware),
    ("Endpoint", lambda r: r.setup.endpoint),
    ("Template", lambda r: r.setup.template),
    ("Reasoning effort", lambda r: r.setup.reasoning_effort),
    ("Runs per case", lambda r: r.setup.runs),
    ("Warmup", lambda r: r.setup.warmup),
    ("Flags", lambda r: flags(r.setup.command_line)),
    ("benchy", lambda r: r.setup.benchy_version),
    ("Started (UTC)", lambda r: r.setup.started_utc),
)


def differences(a: RunResult, b: RunResult) -> list[tuple[str, str, str]]:
    """(title, a's value, b's value) for each setting that differs; "not recorded" for none."""

    def shown(value: object) -> str:
        return "not recorded" if value is None else f"{value:,}" if isinstance(value, int) else str(value)

    rows = ((title, get(a), get(b)) for title, get in FIELDS)
    return [(title, shown(va), shown(vb)) for title, va, vb in rows if va != vb]
