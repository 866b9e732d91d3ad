"""Scenarios and cases: what to measure, before anything is sent.

A case is one (prompt length × output length × concurrency × depth) combination. Cases come
from CLI flags (`--pp 512 2048 --tg 32 128` → 4 cases) and from scenario files
(`benchy/scenarios/*.toml`, shipped in the package and linked at the top of the repository as
`scenarios/`; any other file by path), which give a name, `pp` / `tg` (a number or a list; `prompt_tokens` /
`output_tokens` are accepted too) and optionally `concurrency`, `runs`, `endpoint`, `depth`, `depth_mode`,
or `rate` (requests/s, a number or a list) in place of `concurrency`: open-loop cases, as `--rate` makes.

Depth (`--depth 4096`): each request carries that many tokens of context before its pp tokens.
`depth_mode` "cold": the context is unique per request, so the server prefills depth + pp;
"cached": the context is sent alone first and reused, so only the pp tokens are new (llama-bench's
`pp512 @ d4096`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchy.jsontypes import JsonObject
from benchy.workloads import cases as workload_cases
from benchy.workloads.case import DEPTH_MODES, ENDPOINTS, Case, ScenarioError
from benchy.workloads.selection import CaseSelection
from benchy.workloads.spec import ThinkTime

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:
    from importlib.abc import Traversable  # a file in the package: a Path unless zipped

SHIPPED = resources.files("benchy") / "scenarios"  # package data: found after any kind of install


def sweep(
    pp: list[int],
    tg: list[int],
    concurrency: list[int],
    depth: list[int] | None = None,
    scenario: str | None = None,
    runs: int | None = None,
    endpoint: str | None = None,
    depth_mode: str = "cold",
) -> list[Case]:
    """Every combination, in the order a reader scans a table: depth, pp, tg, then concurrency."""
    if depth_mode not in DEPTH_MODES:
        raise ScenarioError(f"depth mode must be one of {', '.join(DEPTH_MODES)}, got {depth_mode!r}")
    for name, values, low in (
        ("--pp", pp, 1),
        ("--tg", tg, 1),
        ("--concurrency", concurrency, 1),
        ("--depth", depth or [0], 0),
    ):
        bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool) or v < low]
        if bad:
            raise ScenarioError(f"{name} must be whole numbers ≥ {low}, got {bad[0]!r}")
    return [
        Case(pp=p, tg=t, concurrency=c, depth=d, scenario=scenario, runs=runs, endpoint=endpoint, depth_mode=depth_mode)
        for d, p, t, c in itertools.product(depth or [0], pp, tg, concurrency)
    ]


def rate_sweep(
    pp: list[int],
    tg: list[int],
    rates: list[float],
    depth: list[int] | None = None,
    scenario: str | None = None,
    runs: int | None = None,
    endpoint: str | None = None,
    depth_mode: str = "cold",
) -> list[Case]:
    """Open-loop cases: every (depth, pp, tg) at each arrival rate (requests/s)."""
    bad = [r for r in rates if not _is_rate(r)]
    if bad:
        raise ScenarioError(f"--rate must be positive numbers (requests/s), got {bad[0]!r}")
    closed = sweep(pp, tg, [1], depth, scenario, runs, endpoint, depth_mode)
    return [dataclasses.replace(c, rate=float(r)) for c in closed for r in rates]


def select_cases(chosen: CaseSelection) -> list[Case]:
    """The run's cases: the scenarios' cases, then a sweep of --pp × --tg × -c × --depth (also
    the default pp512 tg128 when nothing else is asked). With scenarios alone, -c / --depth /
    --depth-mode re-sweep each scenario case (a scenario's rate stays unless -c replaces it);
    --rate turns every case into open-loop ones, equal cases made once. ScenarioError for a
    file or a combination that cannot be measured. A workload flag (--turns, --shared-prefix,
    --trace) makes the run's cases on its own (workload_selection)."""
    chosen.workload.check()
    if chosen.workload.chosen():
        return workload_selection(chosen)
    cases = [c for name in chosen.scenarios for c in load_scenario(name)]
    if chosen.pp or chosen.tg or not cases:
        cases += sweep(
            list(chosen.pp) or [512],
            list(chosen.tg) or [128],
            list(chosen.concurrency) or [1],
            list(chosen.depth) or None,
            depth_mode=chosen.depth_mode or "cold",
        )
    elif chosen.concurrency or chosen.depth or chosen.depth_mode:
        cases = _unique(
            dataclasses.replace(swept, rate=None if chosen.concurrency else c.rate)
            for c in cases
            for swept in sweep(
                [c.pp],
                [c.tg],
                list(chosen.concurrency) or [c.concurrency],
                list(chosen.depth) or [c.depth],
                c.scenario,
                c.runs,
                c.endpoint,
                chosen.depth_mode or c.depth_mode,
            )
        )
    if chosen.rate and chosen.concurrency:
        raise ScenarioError(
            "--rate and --concurrency cannot be combined: --rate is an open loop; "
            "cap its requests in flight with --max-inflight"
        )
    if chosen.rate:
        cases = _unique(
            r
            for c in cases
            for r in rate_sweep(
                [c.pp], [c.tg], list(chosen.rate), [c.depth], c.scenario, c.runs, c.endpoint, c.depth_mode
            )
        )
    return cases


def workload_selection(chosen: CaseSelection) -> list[Case]:
    """The cases of --turns, --shared-prefix or --trace: -c is the conversations (--turns) or
    the load, --pp the new message (--turns) or the whole prompt (--shared-prefix)."""
    flags = chosen.workload
    what = flags.chosen()[0]
    if chosen.scenarios:
        raise ScenarioError(f"{what} makes its own cases: drop --scenario")
    if chosen.rate or chosen.depth or chosen.depth_mode:
        raise ScenarioError(f"{what} cannot be combined with --rate, --depth or --depth-mode")
    if flags.trace:
        if chosen.pp or chosen.tg or chosen.concurrency:
            raise ScenarioError("--trace takes its lengths and times from the trace: drop --pp, --tg and -c")
        return [workload_cases.trace_case(flags.trace, flags.speed or 1.0, max_gap_s=flags.max_gap)]
    pp, tg, concurrency = list(chosen.pp), list(chosen.tg), list(chosen.concurrency)
    if flags.turns:
        think = ThinkTime.parse(flags.think_time) if flags.think_time is not None else ThinkTime()
        return workload_cases.multi_turn_cases(
            pp or [256],
            tg or [64],
            concurrency or [4],
            flags.turns,
            think,
            flags.first_tokens,
            flags.keep_reasoning,
            flags.cold_baseline,
            subagents=flags.subagents or 0,
        )
    return workload_cases.shared_prefix_cases(
        pp or [2048], tg or [32], concurrency or [1], list(flags.shared_prefix), flags.groups or 1
    )


def _unique(cases: Iterable[Case]) -> list[Case]:
    return list(dict.fromkeys(cases))


def _is_rate(value: object) -> bool:
    """A finite positive number of requests/s (NaN fails both comparisons)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def find_scenario(name_or_file: str) -> Path | Traversable:
    path = Path(name_or_file)
    if path.suffix == ".toml" or path.exists():
        if path.is_dir():
            raise ScenarioError(f"--scenario {name_or_file} is a folder: give a .toml file in it, or a shipped name")
        if not path.is_file():
            raise ScenarioError(f"scenario file not found: {name_or_file}")
        return path
    shipped = SHIPPED / f"{name_or_file}.toml"
    if shipped.is_file():
        return shipped
    raise ScenarioError(f"unknown scenario {name_or_file!r}; shipped: {', '.join(shipped_names())}")


def shipped_names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in SHIPPED.iterdir() if p.name.endswith(".toml"))


def load_scenario(name_or_file: str) -> list[Case]:
    path = find_scenario(name_or_file)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: invalid TOML: {exc}") from None
    try:
        return _cases_from_table(path, data)
    except ScenarioError as exc:
        raise ScenarioError(_with_line(str(exc), path, text, data)) from None


def _with_line(message: str, path: Path | Traversable, text: str, data: dict[str, Any]) -> str:
    """`path:LINE: ...` for the key the message names first (its first `key =` line)."""
    rest = message.removeprefix(f"{path}: ")
    named = [(m.start(), key) for key in data if (m := re.search(rf"(?<!\w){re.escape(key)}(?!\w)", rest))]
    if not named:
        return message
    key = min(named)[1]
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return f"{path}:{number}: {rest}"
    return message


_KNOWN_KEYS = {
    "name",
    "description",
    "pp",
    "tg",
    "prompt_tokens",
    "output_tokens",
    "concurrency",
    "runs",
    "endpoint",
    "depth",
    "depth_mode",
    "rate",
    # cache-aware workloads (benchy/workloads): kind = "multi_turn" | "shared_prefix" | "trace"
    "kind",
    "turns",
    "first_tokens",
    "think_time",
    "keep_reasoning",
    "cold_baseline",
    "shared_fraction",
    "groups",
    "trace",
    "speed",
    "max_requests",
    "max_gap",  # an agent trace's idle gaps capped, s (--max-gap)
    "subagents",  # child agents each multi_turn turn forks (--subagents)
    "extra_body",  # a table merged into every request body (client/extra_body.py)
    "stream",  # false: whole answers, as --no-stream
    "tools",  # "builtin", a JSON file beside the scenario, or the definitions (workloads/tools.py)
    "tool_choice",  # auto | required | none | a tool's name
    # real prompts (docs/datasets.md): with pp, fitted; without, each entry's own (natural)
    "dataset",
    "dataset_min_tokens",
    "dataset_max_tokens",
}
_DATASET_KEYS = ("dataset", "dataset_min_tokens", "dataset_max_tokens")
_WORKLOAD_KEYS = {
    "multi_turn": {"turns", "first_tokens", "think_time", "keep_reasoning", "cold_baseline", "subagents"},
    "shared_prefix": {"shared_fraction", "groups"},
    "trace": {"trace", "speed", "max_requests", "max_gap"},
}


def _cases_from_table(path: Path | Traversable, data: dict[str, Any]) -> list[Case]:
    """The table's cases, each with the table's extra_body and stream (false: whole answers)."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise ScenarioError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KNOWN_KEYS))})")
    extra, stream = data.get("extra_body"), data.get("stream", True)
    if not isinstance(stream, bool):
        raise ScenarioError(f"{path}: stream must be true or false, got {stream!r}")
    if "tools" in data or "tool_choice" in data:
        extra = _with_tools(path, extra, data.get("tools"), data.get("tool_choice"))
    source = {k: data[k] for k in _DATASET_KEYS if k in data}
    data = {k: v for k, v in data.items() if k not in ("extra_body", "stream", "tools", "tool_choice", *_DATASET_KEYS)}
    cases = _dataset_cases(path, data, source) if source else _table_cases(path, data)
    if not stream:
        cases = [dataclasses.replace(c, stream=False) for c in cases]
    if extra is None:
        return cases
    if not isinstance(extra, dict):  # the fields it sets are checked where the client is known (cli)
        raise ScenarioError(f"{path}: extra_body must be a table of fields, got {extra!r}")
    text = json.dumps(extra, sort_keys=True, separators=(",", ":"))
    return [dataclasses.replace(c, extra_body=text) for c in cases]


def _with_tools(path: Path | Traversable, extra: object, given: object, choice: object) -> JsonObject:
    """The table's extra_body with its `tools` (OpenAI function definitions: "builtin", a JSON
    file named beside the scenario, or the definitions themselves) and `tool_choice`, which the
    client sends in each API's words (client/tools.py)."""
    from benchy.workloads import tools

    if extra is not None and not isinstance(extra, dict):
        raise ScenarioError(f"{path}: extra_body must be a table of fields, got {extra!r}")
    out = dict(extra or {})
    try:
        if isinstance(given, str):
            named = (
                given if given == tools.BUILTIN or Path(given).is_absolute() else str(Path(str(path)).parent / given)
            )
            out["tools"] = tools.load(named)
        elif given is not None:
            out["tools"] = tools.checked(given, f"{path}: tools")
        if choice is not None:
            if not isinstance(choice, str):
                raise tools.ToolsError(f"{path}: tool_choice must be auto, required, none or a tool's name")
            out["tool_choice"] = tools.check_choice(choice, out.get("tools"), f"{path}: tool_choice")
    except tools.ToolsError as exc:
        raise ScenarioError(str(exc)) from None
    return out


def _dataset_cases(path: Path | Traversable, data: dict[str, Any], source: dict[str, Any]) -> list[Case]:
    """A table with `dataset = "FILE"` (found beside the scenario file, or "sample"): its mode
    chosen by the table's keys as by the flags beside --dataset: with pp, the sweep's cases of
    real text cut to length (fitted); without, each sampled entry's own prompt (natural), one
    case per tg and concurrency (or rate)."""
    from benchy.workloads import dataset_cases  # it reads the file: only for a table that names one

    file = source.get("dataset")
    if not isinstance(file, str) or not file:
        raise ScenarioError(f'{path}: dataset must name a dataset file (or "sample"), got {file!r}')
    if data.get("kind", "sweep") != "sweep":
        raise ScenarioError(
            f"{path}: dataset is for a sweep (with or without pp): for conversations use --dataset --turns"
        )
    beside = path.parent / file if isinstance(path, Path) else None
    file = str(beside) if file != "sample" and beside is not None and beside.exists() else file
    limits = [source.get(k) for k in ("dataset_min_tokens", "dataset_max_tokens")]
    if any(v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1) for v in limits):
        raise ScenarioError(f"{path}: dataset_min_tokens and dataset_max_tokens must be whole numbers ≥ 1")
    fitted = "pp" in data or "prompt_tokens" in data
    cases = _table_cases(path, data) if fitted else []
    chosen = CaseSelection(
        pp=tuple(c.pp for c in cases),
        tg=tuple(_int_list(path, data, "tg", "output_tokens", default=[], low=1)),
        concurrency=tuple(_int_list(path, data, "concurrency", default=[], low=1)),
        depth=tuple(_int_list(path, data, "depth", default=[], low=0)),
        depth_mode=data.get("depth_mode"),
        rate=tuple(_rate_list(path, data) or ()),
    )
    try:
        return dataset_cases.apply(cases, file, chosen, *limits)
    except ValueError as exc:  # ScenarioError, WorkloadError
        raise ScenarioError(f"{path}: {str(exc).replace('--', '')}") from None


def _table_cases(path: Path | Traversable, data: dict[str, Any]) -> list[Case]:
    name = data.get("name", Path(path.name).stem)
    kind = data.get("kind", "sweep")
    if kind != "sweep":
        try:
            return _workload_cases(path, data, kind, name)
        except ValueError as exc:  # ScenarioError, WorkloadError
            raise ScenarioError(f"{path}: {exc}") from None
    stray = sorted(set(data) & set().union(*_WORKLOAD_KEYS.values()))
    if stray:
        raise ScenarioError(f'{path}: {stray[0]!r} needs a workload kind (kind = "multi_turn", ...)')
    pp = _int_list(path, data, "pp", "prompt_tokens", low=1)
    tg = _int_list(path, data, "tg", "output_tokens", low=1)
    concurrency = _int_list(path, data, "concurrency", default=[1], low=1)
    depth = _int_list(path, data, "depth", default=[0], low=0)
    runs = data.get("runs")
    if runs is not None and (not isinstance(runs, int) or runs < 1):
        raise ScenarioError(f"{path}: runs must be a whole number ≥ 1, got {runs!r}")
    endpoint = data.get("endpoint")
    if endpoint is not None and endpoint not in ENDPOINTS:
        raise ScenarioError(f"{path}: endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
    rates = _rate_list(path, data)
    try:
        if rates is not None:
            return rate_sweep(
                pp,
                tg,
                rates,
                depth,
                scenario=name,
                runs=runs,
                endpoint=endpoint,
                depth_mode=data.get("depth_mode", "cold"),
            )
        return sweep(
            pp,
            tg,
            concurrency,
            depth,
            scenario=name,
            runs=runs,
            endpoint=endpoint,
            depth_mode=data.get("depth_mode", "cold"),
        )
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from None


def _workload_cases(path: Path | Traversable, data: dict[str, Any], kind: str, name: str) -> list[Case]:
    """A `kind = "multi_turn" | "shared_prefix" | "trace"` table (see the README)."""
    if kind not in _WORKLOAD_KEYS:
        raise ScenarioError(f"kind must be one of sweep, {', '.join(_WORKLOAD_KEYS)}, got {kind!r}")
    foreign = sorted((set(data) & set().union(*_WORKLOAD_KEYS.values())) - _WORKLOAD_KEYS[kind])
    if foreign:
        raise ScenarioError(f"{foreign[0]!r} does not apply to kind {kind!r}")
    endpoint = data.get("endpoint")
    if endpoint is not None and endpoint not in ENDPOINTS:
        raise ScenarioError(f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
    if kind == "trace":
        trace = data.get("trace")
        if not isinstance(trace, str):
            raise ScenarioError('trace must name a trace file (or "sample")')
        # A trace named relative to its scenario file is found beside it.
        beside = path.parent / trace if isinstance(path, Path) else None
        return [
            workload_cases.trace_case(
                str(beside) if trace != "sample" and beside is not None and beside.exists() else trace,
                data.get("speed", 1.0),
                data.get("max_requests"),
                scenario=name,
                max_gap_s=_number(data, "max_gap"),
            )
        ]
    pp = _int_list(path, data, "pp", "prompt_tokens", low=1)
    tg = _int_list(path, data, "tg", "output_tokens", low=1)
    concurrency = _int_list(path, data, "concurrency", default=[1], low=1)
    if kind == "multi_turn":
        keep, cold = data.get("keep_reasoning", False), data.get("cold_baseline", False)
        for key, value in (("keep_reasoning", keep), ("cold_baseline", cold)):
            if not isinstance(value, bool):
                raise ScenarioError(f"{key} must be true or false, got {value!r}")
        return workload_cases.multi_turn_cases(
            pp,
            tg,
            concurrency,
            data.get("turns", 4),
            ThinkTime.parse(data.get("think_time", 0)),
            data.get("first_tokens"),
            keep,
            cold,
            scenario=name,
            endpoint=endpoint,
            subagents=_whole(data, "subagents"),
        )
    fractions = data.get("shared_fraction", [0.5])
    return workload_cases.shared_prefix_cases(
        pp,
        tg,
        concurrency,
        fractions if isinstance(fractions, list) else [fractions],
        data.get("groups", 1),
        scenario=name,
        runs=data.get("runs"),
        endpoint=endpoint,
    )


def _number(data: JsonObject, key: str) -> float | None:
    """A number ≥ 0 of seconds, named by its TOML key; None where the table has none."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ScenarioError(f"{key} must be a number of seconds ≥ 0, got {value!r}")
    return float(value)


def _whole(data: JsonObject, key: str) -> int:
    """A whole number ≥ 0 named by its TOML key (0 where the table has none)."""
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{key} must be a whole number ≥ 0, got {value!r}")
    return value


def _int_list(
    path: Path | Traversable,
    data: dict[str, Any],
    key: str,
    alias: str | None = None,
    default: list[int] | None = None,
    low: int | None = None,
) -> list[int]:
    """A whole number or a list of them, each ≥ `low`, named by its TOML key (not a flag)."""
    named = key if key in data or not alias else alias
    value = data.get(key, data.get(alias) if alias else None)
    if value is None:
        if default is not None:
            return default
        raise ScenarioError(f"{path}: missing {key!r}" + (f" (or {alias!r})" if alias else ""))
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ScenarioError(f"{path}: {named} must be a whole number or a list of them, got {value!r}")
    below = [v for v in values if low is not None and v < low]
    if below:
        raise ScenarioError(f"{path}: {named} must be ≥ {low}, got {below[0]!r}")
    return values


def _rate_list(path: Path | Traversable, data: dict[str, Any]) -> list[float] | None:
    """The `rate` key: requests/s of open-loop cases, or None for a closed loop."""
    value = data.get("rate")
    if value is None:
        return None
    if "concurrency" in data:
        raise ScenarioError(
            f"{path}: rate and concurrency cannot be combined: rate is an open loop; "
            "cap its requests in flight with --max-inflight"
        )
    values = value if isinstance(value, list) else [value]
    if not values or not all(_is_rate(v) for v in values):
        raise ScenarioError(f"{path}: rate must be a positive number of requests/s or a list of them, got {value!r}")
    return [float(v) for v in values]
