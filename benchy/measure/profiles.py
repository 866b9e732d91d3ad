"""Memory-bandwidth ceiling for single-stream decode.

At batch size 1 every generated token reads all active weights once, plus the KV cache
of the context it attends to. Memory bandwidth therefore caps decode speed:

    ceiling [tok/s] = bandwidth [bytes/s] ÷ (weight bytes + KV bytes read per token)

A measured rate above the ceiling was not measured correctly (buffered streaming,
cache hits, speculative decoding counted as plain decode...). Profiles live in
``benchy/data/profiles.toml``; the arithmetic behind each figure is written there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from benchy.jsontypes import Saved

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

GB = 1e9  # bandwidth is quoted in decimal GB/s
KV_TENSORS = 2  # K and V


class ProfileError(ValueError):
    """An unknown profile name, a malformed profile, or an impossible input."""


@dataclass(frozen=True)
class Hardware:
    """A device and its peak memory bandwidth in GB/s (10^9 bytes/s)."""

    name: str
    bandwidth_gbs: float
    note: str = ""


@dataclass(frozen=True)
class KvShape(Saved):
    """The KV cache's shape: what each decoded token reads of the context (saved as
    setup.ceiling.kv_shape, so a report re-makes the ceiling from results.json alone)."""

    layers: int
    kv_heads: int
    head_dim: int
    kv_bytes_per_element: float = 2
    sliding_window: int | None = None
    sliding_window_layer_fraction: float = 0.0


@dataclass(frozen=True)
class ModelProfile:
    """What one decoded token reads: weights (bytes) and the KV-cache shape."""

    name: str
    active_bytes_per_token: float
    kv: KvShape
    aliases: tuple[str, ...] = ()
    weights: str = ""


@dataclass(frozen=True)
class Ceiling:
    """Bandwidth ceiling for one case: ``pp`` prompt tokens after ``depth`` tokens already
    in context, then ``tg`` generated tokens.

    ``context_tokens`` is the mid-decode context, depth + pp + tg/2. KV read grows
    linearly with context, so the rate at the mid point equals tg ÷ total decode time
    (exactly for full attention; sliding-window layers make it a hair conservative).
    """

    pp: int
    tg: int
    depth: int
    context_tokens: float
    bandwidth_gbs: float
    weight_bytes_per_token: float
    kv_bytes_per_token: float
    tokens_per_s: float

    def percent_of(self, rate_tps: float) -> float:
        """``rate_tps`` (tok/s) as a percentage of this ceiling; above 100 is impossible."""
        return 100.0 * rate_tps / self.tokens_per_s


# ------------------------------------------------------------------ formulas


def kv_bytes_per_token(model: ModelProfile, context_tokens: float) -> float:
    """KV-cache bytes read to decode one token that attends to ``context_tokens`` tokens.

    Per layer and per attended token: 2 (K and V) × kv_heads × head_dim × kv_bytes_per_element
    bytes. Full-attention layers attend to the whole context; sliding-window layers to at
    most ``sliding_window`` tokens. Result in bytes.
    """
    _require(context_tokens >= 0, f"context must be >= 0 tokens, got {context_tokens}")
    per_layer_token = KV_TENSORS * model.kv.kv_heads * model.kv.head_dim * model.kv.kv_bytes_per_element
    sliding_layers = model.kv.layers * model.kv.sliding_window_layer_fraction
    full_layers = model.kv.layers - sliding_layers
    window = context_tokens if model.kv.sliding_window is None else model.kv.sliding_window
    attended = full_layers * context_tokens + sliding_layers * min(window, context_tokens)
    return per_layer_token * attended


def decode_ceiling_tps(bandwidth_gbs: float, active_bytes_per_token: float, kv_bytes: float = 0) -> float:
    """Upper bound on single-stream decode, in tok/s.

    bandwidth_gbs × 10^9 [bytes/s] ÷ (active_bytes_per_token + kv_bytes) [bytes/token].
    """
    _require(bandwidth_gbs > 0, f"bandwidth must be > 0 GB/s, got {bandwidth_gbs}")
    _require(active_bytes_per_token > 0, f"active bytes per token must be > 0, got {active_bytes_per_token}")
    _require(kv_bytes >= 0, f"KV bytes must be >= 0, got {kv_bytes}")
    return bandwidth_gbs * GB / (active_bytes_per_token + kv_bytes)


def mid_decode_context(pp: int, tg: int, depth: int = 0) -> float:
    """Tokens in context halfway through generation: depth + pp + tg / 2."""
    _require(pp >= 0 and depth >= 0, f"pp and depth must be >= 0, got pp={pp} depth={depth}")
    _require(tg >= 1, f"tg must be >= 1, got {tg}")
    return depth + pp + tg / 2


def case_ceiling(bandwidth_gbs: float, model: ModelProfile, pp: int, tg: int, depth: int = 0) -> Ceiling:
    """Ceiling for one (pp, tg, depth) case of a profiled model: weights plus KV at mid-decode."""
    context = mid_decode_context(pp, tg, depth)
    kv = kv_bytes_per_token(model, context)
    return _ceiling(pp, tg, depth, context, bandwidth_gbs, model.active_bytes_per_token, kv)


def custom_ceiling(bandwidth_gbs: float, active_bytes_per_token: float, pp: int, tg: int, depth: int = 0) -> Ceiling:
    """Ceiling from raw user figures (no model profile, so no KV term): weights only."""
    context = mid_decode_context(pp, tg, depth)
    return _ceiling(pp, tg, depth, context, bandwidth_gbs, active_bytes_per_token, 0.0)


def _ceiling(
    pp: int, tg: int, depth: int, context: float, bandwidth_gbs: float, weight_bytes: float, kv_bytes: float
) -> Ceiling:
    tps = decode_ceiling_tps(bandwidth_gbs, weight_bytes, kv_bytes)
    return Ceiling(pp, tg, depth, context, bandwidth_gbs, weight_bytes, kv_bytes, tps)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ProfileError(message)


# ------------------------------------------------------------------ lookups


def hardware(name: str) -> Hardware:
    """The hardware profile called ``name`` or one of its aliases (case-insensitive)."""
    return _lookup("hardware", name, _hardware_by_key())


def model_profile(name: str) -> ModelProfile:
    """The model profile called ``name`` or one of its aliases (case-insensitive)."""
    return _lookup("model", name, _models_by_key())


def hardware_names() -> list[str]:
    """Canonical hardware profile names, sorted."""
    return sorted(_catalog()["hardware"])


def model_names() -> list[str]:
    """Canonical model profile names, sorted."""
    return sorted(_catalog()["models"])


def guess_model_profile(served_model_id: str) -> ModelProfile | None:
    """The profile a served model id names, or None when unsure.

    Tries an exact name/alias first, then the longest name/alias found inside the id on
    word boundaries ("meta-llama/Meta-Llama-3-8B-Instruct" → llama-3-8b). Returns None
    when the id names a quantized build (FP8, AWQ, GGUF, Q4_K_M, 4bit...): those read
    fewer bytes than the profile, and its ceiling would be too low.
    """
    key = _normalize(served_model_id)
    models = _models_by_key()
    if key in models:
        return models[key]
    if _names_quantized_build(key):
        return None
    for alias in sorted(models, key=len, reverse=True):
        if re.search(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9])", key):
            return models[alias]
    return None


_QUANTIZED_TOKEN = re.compile(r"i?q\d\w*|\d+bits?|awq|gptq|fp8|fp4|nvfp4|nf4|int[48]|w\d+a\d+|gguf|exl\d|bnb|mlx|dwq")


def _names_quantized_build(key: str) -> bool:
    return any(_QUANTIZED_TOKEN.fullmatch(tok) for tok in re.split(r"[^a-z0-9]+", key))


def _normalize(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


_Profile = TypeVar("_Profile", "Hardware", "ModelProfile")


def _lookup(kind: str, name: str, by_key: Mapping[str, _Profile]) -> _Profile:
    found = by_key.get(_normalize(name))
    if found is None:
        known = sorted({p.name for p in by_key.values()})
        raise ProfileError(f"unknown {kind} {name!r}; known: {', '.join(known)}")
    return found


# ------------------------------------------------------------------ loading profiles.toml


@functools.cache
def _catalog() -> dict[str, Any]:
    text = resources.files("benchy").joinpath("data/profiles.toml").read_text(encoding="utf-8")
    catalog: dict[str, Any] = tomllib.loads(text)
    return catalog


@functools.cache
def _hardware_by_key() -> dict[str, Hardware]:
    entries = _catalog()["hardware"]
    return _index({name: _hardware_from(name, e) for name, e in entries.items()}, entries)


@functools.cache
def _models_by_key() -> dict[str, ModelProfile]:
    entries = _catalog()["models"]
    return _index({name: _model_from(name, e) for name, e in entries.items()}, entries)


def _index(profiles: dict[str, Any], entries: dict[str, Any]) -> dict[str, Any]:
    """Map each normalized name and alias to its profile; an alias used twice is an error."""
    by_key = {}
    for name, profile in profiles.items():
        for key in [name, *entries[name].get("aliases", [])]:
            key = _normalize(key)
            _require(key not in by_key, f"profiles.toml: {key!r} names two profiles")
            by_key[key] = profile
    return by_key


def _hardware_from(name: str, entry: dict[str, Any]) -> Hardware:
    try:
        return Hardware(name, float(entry["bandwidth_gbs"]), entry.get("note", ""))
    except KeyError as exc:
        raise ProfileError(f"profiles.toml: hardware {name!r} lacks {exc.args[0]!r}") from None


def _model_from(name: str, entry: dict[str, Any]) -> ModelProfile:
    try:
        return ModelProfile(
            name=name,
            active_bytes_per_token=float(entry["active_bytes_per_token"]),
            kv=KvShape(
                layers=int(entry["layers"]),
                kv_heads=int(entry["kv_heads"]),
                head_dim=int(entry["head_dim"]),
                kv_bytes_per_element=float(entry["kv_bytes_per_element"]),
                sliding_window=entry.get("sliding_window"),
                sliding_window_layer_fraction=float(entry.get("sliding_window_layer_fraction", 0.0)),
            ),
            aliases=tuple(entry.get("aliases", ())),
            weights=entry.get("weights", ""),
        )
    except KeyError as exc:
        raise ProfileError(f"profiles.toml: model {name!r} lacks {exc.args[0]!r}") from None
