"""Who is serving: the engine, its version and build, the model, its context length and how many
requests it runs at once, read from the server's own endpoints before a run starts.

Why: a figure means little without knowing what produced it, and two facts change what benchy
may ask of a server — the context length (a prompt longer than it gets an HTTP 400, so probes cap
their lengths to it) and the slots (more requests in flight than slots wait in a queue, which
TTFT then holds). Every engine says these things in its own way, so each is asked where it
answers, and a fact nobody states is recorded as unknown with the reason, never guessed:

  llama.cpp  GET /props: build_info, total_slots, default_generation_settings.n_ctx (per slot),
             model_path, chat_template; /v1/models meta.n_ctx_train.
  vLLM       GET /version; /v1/models max_model_len, root (the weights' path).
  SGLang     GET /get_server_info: version, model_path, context_length, max_running_requests.
  Ollama     GET /api/version; POST /api/show: model_info.<arch>.context_length, num_ctx.
  any        the `Server` response header, as a last resort.

Nothing here raises for an endpoint that is missing or broken: an identity is evidence, not a
precondition of the run.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field, replace
from typing import Any

from benchy.jsontypes import Saved
from benchy.server.pages import PageSource, json_of, outcome

PROBE_TIMEOUT_S = 5.0
LLAMACPP, VLLM, SGLANG, OLLAMA, SIM = "llama.cpp", "vLLM", "SGLang", "Ollama", "benchy-sim"
# /v1/models owned_by as each engine writes it.
_OWNERS = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMACPP, "library": OLLAMA}


@dataclass(frozen=True, slots=True)
class ServerIdentity(Saved):
    """What the server said about itself; each None has its reason in `unavailable`
    (setup.server in results.json)."""

    engine: str | None = None
    version: str | None = None
    build: str | None = None
    server_header: str | None = None
    model: str | None = None  # the id requests name
    model_path: str | None = None
    context_length: int | None = None  # tokens one request may hold (prompt + output)
    context_source: str | None = None  # where context_length was read
    context_train: int | None = None  # the model's trained context, when the server says
    slots: int | None = None  # requests run at once, when the server says
    slots_source: str | None = None
    chat_template: str | None = None
    answered: dict[str, int | str] = field(default_factory=dict)  # endpoint → HTTP status or error
    unavailable: dict[str, str] = field(default_factory=dict)  # field → why it is unknown

    @property
    def engine_version(self) -> str:
        """'vLLM 0.11.0', 'llama.cpp b6500', or what is known of it."""
        parts = [p for p in (self.engine, self.version or self.build) if p]
        return " ".join(parts) if parts else (self.server_header or "unknown server")

    @property
    def llamacpp(self) -> bool:
        """It named itself llama.cpp, or answered llama.cpp's own /props (a proxy in front may
        hide its name): its host-RAM prompt cache may be on (/props does not say)."""
        return self.engine == LLAMACPP or self.answered.get("/props") == 200


def root_url(base_url: str) -> str:
    """The server's root: the OpenAI base URL without its trailing /v1."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


@dataclass
class _Answer:
    status: int | str  # HTTP status, or a short error: the failure's kind ("timeout", "connect"), "not JSON"
    body: object = None  # parsed JSON, or None
    server: str | None = None  # the Server header

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.body is not None


async def _fetch(pages: PageSource, method: str, url: str, payload: dict[str, Any] | None = None) -> _Answer:
    page = await pages.page(method, url, payload, PROBE_TIMEOUT_S)
    server = page.headers.get("server")
    if page.failure is not None or page.status != 200:
        return _Answer(outcome(page), None, server)
    body = json_of(page)
    return _Answer(200, body, server) if body is not None else _Answer("not JSON", None, server)


async def identify(pages: PageSource, base_url: str, model: str | None) -> ServerIdentity:
    """Asks every engine's endpoints at once (a few 404s cost nothing) and reads what answered."""
    root = root_url(base_url)
    paths = {
        "/props": ("GET", f"{root}/props"),
        "/version": ("GET", f"{root}/version"),
        "/v1/models": ("GET", f"{base_url.rstrip('/')}/models"),
        "/get_server_info": ("GET", f"{root}/get_server_info"),
        "/api/version": ("GET", f"{root}/api/version"),
    }
    answers = dict(zip(paths, await asyncio.gather(*(_fetch(pages, m, u) for m, u in paths.values()))))
    if answers["/api/version"].ok and model:
        answers["/api/show"] = await _fetch(pages, "POST", f"{root}/api/show", {"model": model})
    return read_identity(answers, model)


def read_identity(answers: dict[str, _Answer], model: str | None) -> ServerIdentity:
    """The identity from the endpoints' answers (pure: the tests feed it recorded answers).
    Each endpoint's reader adds what it states to what the ones before found (a new identity
    each, the answers read in order), and the reasons for what is left unknown come last."""
    server_header = next((a.server for a in answers.values() if a.server), None)
    entry = _model_entry(answers.get("/v1/models"), model)
    ident = ServerIdentity(
        engine=_engine(answers, entry, server_header),
        server_header=server_header,
        model=model,
        answered={path: a.status for path, a in answers.items()},
    )
    # Most exact first: the first source to state a context or slot count wins.
    ident = _read_llamacpp(ident, answers.get("/props"))
    ident = _read_sglang(ident, answers.get("/get_server_info"))
    ident = _read_models_entry(ident, entry)
    ident = _read_version(ident, answers.get("/version"))
    ident = _read_ollama(ident, answers.get("/api/version"), answers.get("/api/show"))
    return replace(ident, unavailable=_unknowns(ident))


def _model_entry(answer: _Answer | None, model: str | None) -> dict[str, Any]:
    data = answer.body.get("data") if answer and answer.ok and isinstance(answer.body, dict) else None
    entries = [m for m in data or [] if isinstance(m, dict)]
    return next((m for m in entries if m.get("id") == model), entries[0] if entries else {})


def _engine(answers: dict[str, _Answer], entry: dict[str, Any], server_header: str | None) -> str | None:
    header = (server_header or "").lower()
    if header.startswith("benchy-sim"):
        return SIM
    if _dict(answers.get("/props")).get("total_slots") is not None or "llama.cpp" in header:
        return LLAMACPP
    if _dict(answers.get("/get_server_info")):
        return SGLANG
    if _dict(answers.get("/api/version")).get("version"):
        return OLLAMA
    owner = _OWNERS.get(str(entry.get("owned_by", "")).lower())
    if owner:
        return owner
    if _dict(answers.get("/version")).get("version") and "max_model_len" in entry:
        return VLLM
    return None


def _dict(answer: _Answer | None) -> dict[str, Any]:
    return answer.body if answer is not None and answer.ok and isinstance(answer.body, dict) else {}


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):  # JSON's others: null, lists, objects
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON Infinity
        return None
    return number if number > 0 else None


def _with_context(ident: ServerIdentity, value: object, source: str) -> ServerIdentity:
    """The first source that states a context wins (the callers go from most to least exact)."""
    number = _positive_int(value)
    if number is not None and ident.context_length is None:
        return replace(ident, context_length=number, context_source=source)
    return ident


def _with_slots(ident: ServerIdentity, value: object, source: str) -> ServerIdentity:
    number = _positive_int(value)
    if number is not None and ident.slots is None:
        return replace(ident, slots=number, slots_source=source)
    return ident


def _read_llamacpp(ident: ServerIdentity, answer: _Answer | None) -> ServerIdentity:
    props = _dict(answer)
    if not props:
        return ident
    ident = replace(
        ident,
        build=ident.build or _text(props.get("build_info")),
        model_path=_text(props.get("model_path")) or ident.model_path,
        chat_template=_text(props.get("chat_template")) or ident.chat_template,
    )
    settings = props.get("default_generation_settings")
    if isinstance(settings, dict):
        ident = _with_context(ident, settings.get("n_ctx"), "/props default_generation_settings.n_ctx (per slot)")
    return _with_slots(ident, props.get("total_slots"), "/props total_slots")


def _read_models_entry(ident: ServerIdentity, entry: dict[str, Any]) -> ServerIdentity:
    meta = entry.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    ident = replace(ident, context_train=_positive_int(meta.get("n_ctx_train")))
    # vLLM and SGLang write max_model_len; llama.cpp's meta.n_ctx is per slot, as /props says.
    ident = _with_context(ident, entry.get("max_model_len"), "/v1/models max_model_len")
    if ident.engine == LLAMACPP:
        ident = _with_context(ident, meta.get("n_ctx"), "/v1/models meta.n_ctx (per slot)")
    root = entry.get("root")
    if isinstance(root, str) and root and root != entry.get("id") and ident.model_path is None:
        return replace(ident, model_path=root)
    return ident


def _read_version(ident: ServerIdentity, answer: _Answer | None) -> ServerIdentity:
    version = _text(_dict(answer).get("version"))
    if version and ident.engine != LLAMACPP:
        return replace(ident, version=version.removeprefix("benchy-sim ").strip() if ident.engine == SIM else version)
    return ident


def _read_sglang(ident: ServerIdentity, answer: _Answer | None) -> ServerIdentity:
    info = _dict(answer)
    if not info:
        return ident
    ident = replace(
        ident,
        version=ident.version or _text(info.get("version")),
        model_path=_text(info.get("model_path")) or ident.model_path,
        chat_template=ident.chat_template or _text(info.get("chat_template")),
    )
    ident = _with_context(ident, info.get("context_length"), "/get_server_info context_length")
    return _with_slots(ident, info.get("max_running_requests"), "/get_server_info max_running_requests")


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.M)


def _read_ollama(ident: ServerIdentity, version: _Answer | None, show: _Answer | None) -> ServerIdentity:
    if ident.engine != OLLAMA:
        return ident
    details = _dict(show)
    info = details.get("model_info")
    info = info if isinstance(info, dict) else {}
    trained = next((v for k, v in info.items() if k.endswith(".context_length")), None)
    ident = replace(
        ident,
        version=ident.version or _text(_dict(version).get("version")),
        context_train=ident.context_train or _positive_int(trained),
        chat_template=ident.chat_template or _text(details.get("template")),
    )
    match = _NUM_CTX.search(str(details.get("parameters") or ""))
    return _with_context(ident, match.group(1), "/api/show parameters num_ctx") if match else ident


def _unknowns(ident: ServerIdentity) -> dict[str, str]:
    """A reason for each fact left unknown, in the words a user can act on."""
    why = {}
    if ident.engine is None:
        why["engine"] = "no engine-specific endpoint answered (/props, /version, /get_server_info, /api/version)"
    if ident.version is None and ident.build is None:
        why["version"] = "the server publishes no version"
    if ident.context_length is None:
        why["context_length"] = _context_reason(ident.engine)
    if ident.slots is None:
        why["slots"] = _slots_reason(ident.engine)
    return why


def _context_reason(engine: str | None) -> str:
    if engine == OLLAMA:
        return (
            "Ollama does not report num_ctx unless the model sets it; its default (2048 or 4096 "
            "tokens by version, or OLLAMA_CONTEXT_LENGTH) silently truncates longer prompts"
        )
    return "the server states no context length (/props n_ctx, /v1/models max_model_len)"


def _slots_reason(engine: str | None) -> str:
    if engine == VLLM:
        return "vLLM does not publish max_num_seqs; /metrics num_requests_running shows how many ran"
    if engine == OLLAMA:
        return "Ollama does not publish OLLAMA_NUM_PARALLEL"
    return "the server does not say how many requests it runs at once"


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def banner(ident: ServerIdentity, base_url: str, output: str | None, metrics_note: str | None = None) -> str:
    """One line for the terminal before a run: where, what engine, which model, how much context."""
    parts = [base_url, ident.engine_version, f"model {ident.model or '?'}"]
    parts.append(f"context {ident.context_length}" if ident.context_length else "context unknown")
    if ident.slots:
        parts.append(f"{ident.slots} slot" if ident.slots == 1 else f"{ident.slots} slots")
    if metrics_note:
        parts.append(metrics_note)
    parts.append(f"results → {output}" if output else "results not saved (no --output)")
    return "benchy: " + " · ".join(parts)
