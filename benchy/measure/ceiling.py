"""The memory-bandwidth ceiling of single-stream decode: what the user gave for it, the figures
it is computed from (saved as setup.ceiling), and a case's ceiling from those figures.

One stream cannot decode faster than memory bandwidth ÷ bytes read per token (active weights +
KV cache at mid-decode, profiles.py). results.py stores each case's ceiling once, when results
are built; checks and reports only read it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from benchy.jsontypes import Saved
from benchy.measure import gpu as gpu_figures
from benchy.measure import profiles


@dataclass(frozen=True, slots=True)
class CeilingSetup(Saved):
    """What the decode ceiling is computed from (--hardware, --model-profile, …); `missing`
    says why there is none."""

    hardware: str | None = None
    bandwidth_gbs: float | None = None
    bandwidth_source: str | None = None
    model_profile: str | None = None
    model_profile_source: str | None = None
    active_bytes_per_token: float | None = None
    weights_source: str | None = None
    kv_shape: profiles.KvShape | None = None
    missing: str | None = None
    # (1.x) the --hardware that the GPUs' own names contradicted, and the name they report
    stated_hardware: str | None = None
    gpu_reports: str | None = None
    # (1.27) whether a GPU's own name (--gpu-metrics) is the `hardware` device: false where
    # only --hardware says so (nothing else a server answers names its device: docs/gpu.md)
    hardware_confirmed: bool | None = None


@dataclass(frozen=True)
class CeilingInputs:
    """What the user gave for the decode ceiling (--hardware, --model-profile, --bandwidth-gbs,
    --active-bytes-per-token); explicit figures override the profiles' ones."""

    hardware: str | None = None
    model_profile: str | None = None
    bandwidth_gbs: float | None = None
    active_bytes_per_token: float | None = None

    @property
    def asked(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))

    def validate(self) -> None:
        """Raises profiles.ProfileError (one line) for an unknown name or a figure ≤ 0."""
        if self.hardware is not None:
            profiles.hardware(self.hardware)
        if self.model_profile is not None:
            profiles.model_profile(self.model_profile)
        for flag, value in (
            ("--bandwidth-gbs", self.bandwidth_gbs),
            ("--active-bytes-per-token", self.active_bytes_per_token),
        ):
            if value is not None and not value > 0:
                raise profiles.ProfileError(f"{flag} must be > 0, got {value:g}")

    def resolve(self, served_model: str, gpu_names: Iterable[str | None] = ()) -> CeilingSetup | None:
        """setup.ceiling: every figure the ceiling is computed from, so results alone
        re-derive it; `missing` says why there is none. None when nothing was asked. Where the
        GPUs (`gpu_names`, as --gpu-metrics read them) name another device than --hardware,
        the measured GPU's profile wins, or, with none known, there is no bandwidth."""
        if not self.asked:
            return None
        hw = profiles.hardware(self.hardware) if self.hardware else None
        names = tuple(gpu_names)
        against = gpu_figures.contradiction(hw.name, names) if hw and not self.bandwidth_gbs else None
        if against is not None:
            return self._contradicted(served_model, hw.name if hw else "", *against)
        confirmed = gpu_figures.names_device(hw.name, names) if hw is not None else None
        return self._resolved(served_model, hw, confirmed=confirmed)

    def _contradicted(
        self, served_model: str, stated: str, measured: profiles.Hardware | None, name: str
    ) -> CeilingSetup:
        """setup.ceiling where the GPU is not the --hardware stated: the GPU's profile, or none."""
        if measured is None:
            why = gpu_figures.unknown_contradiction(stated, name)
            return self._resolved(served_model, None, missing=why, stated=stated, reports=name)
        source = gpu_figures.overruled(stated, measured, name)
        # confirmed: the GPU's own profile
        return self._resolved(served_model, measured, source=source, confirmed=True, stated=stated, reports=name)

    def _resolved(
        self,
        served_model: str,
        hw: profiles.Hardware | None,
        *,
        missing: str | None = None,
        source: str | None = None,
        confirmed: bool | None = None,
        stated: str | None = None,
        reports: str | None = None,
    ) -> CeilingSetup:
        """setup.ceiling from `hw`'s profile; where the GPU contradicted --hardware, why there
        is no bandwidth (`missing`) or where the GPU's own came from (`source`), decided first."""
        bandwidth = self.bandwidth_gbs or (hw.bandwidth_gbs if hw else None)
        model, model_source = None, None
        if self.model_profile:
            model, model_source = profiles.model_profile(self.model_profile), "--model-profile"
        elif bandwidth:
            model = profiles.guess_model_profile(served_model)
            model_source = f"guessed from the served model id {served_model!r}" if model else None
        weights = self.active_bytes_per_token or (model.active_bytes_per_token if model else None)
        return CeilingSetup(
            hardware=hw.name if hw else None,
            bandwidth_gbs=bandwidth,
            bandwidth_source=source or ("--bandwidth-gbs" if self.bandwidth_gbs else (hw.note if hw else None)),
            model_profile=model.name if model else None,
            model_profile_source=model_source,
            active_bytes_per_token=weights,
            weights_source="--active-bytes-per-token"
            if self.active_bytes_per_token
            else (model.weights if model else None),
            kv_shape=model.kv if model else None,
            missing=missing or _missing(bandwidth, weights, served_model),
            stated_hardware=stated,
            gpu_reports=reports,
            hardware_confirmed=confirmed,
        )


def _missing(bandwidth: float | None, weights: float | None, served_model: str) -> str | None:
    if not bandwidth:
        return "no memory bandwidth: pass --hardware or --bandwidth-gbs"
    if not weights:
        return (
            f"no model profile matches the served model {served_model!r} (quantized builds are "
            "never guessed): pass --model-profile or --active-bytes-per-token"
        )
    return None


def case_ceiling(pp: int, tg: int, depth: int, ceiling: CeilingSetup | None) -> profiles.Ceiling | None:
    """A case's decode ceiling from setup.ceiling (weights + KV read at mid-decode); None
    without one. Raises profiles.ProfileError for figures no profile could hold."""
    if ceiling is None or ceiling.missing or not ceiling.bandwidth_gbs or not ceiling.active_bytes_per_token:
        return None
    bandwidth, weights, tg = ceiling.bandwidth_gbs, ceiling.active_bytes_per_token, max(1, tg)
    if not ceiling.kv_shape:
        return profiles.custom_ceiling(bandwidth, weights, pp, tg, depth)
    model = profiles.ModelProfile(
        name=ceiling.model_profile or "custom", active_bytes_per_token=weights, kv=ceiling.kv_shape
    )
    return profiles.case_ceiling(bandwidth, model, pp, tg, depth)
