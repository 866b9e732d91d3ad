"""Formulas of figures taken over a case rather than one request: the GPU's energy per output
token and per request, and a shared prefix's TTFT gain. Like the request formulas, each takes
what it reads and the values of the metrics it depends on (the registry passes them forward
in its order), and never calls another formula."""

from __future__ import annotations

from dataclasses import dataclass

from benchy.measure.unavailable import NO_IDLE_BASELINE, NO_OUTPUT_TOKENS, NO_SUCCESS, Unavailable


@dataclass(frozen=True)
class EnergyWindow:
    """What the energy figures read of a case besides its energy: the output tokens and
    successful requests measured in it, the idle draw sampled before the run, the window."""

    output_tokens: int
    requests: int
    idle_power_w: float | None
    window_s: float


def joules_per_token(window: EnergyWindow, energy_j: float) -> float | Unavailable:
    if window.output_tokens <= 0:
        return Unavailable(NO_OUTPUT_TOKENS, "no output token was counted in the case")
    return energy_j / window.output_tokens


def joules_per_request(window: EnergyWindow, energy_j: float) -> float | Unavailable:
    if window.requests <= 0:
        return Unavailable(NO_SUCCESS, "no request succeeded in the case")
    return energy_j / window.requests


def marginal_joules_per_token(window: EnergyWindow, energy_j: float) -> float | Unavailable:
    if window.idle_power_w is None:
        return Unavailable(NO_IDLE_BASELINE, "no idle baseline was sampled before the run")
    if window.output_tokens <= 0:
        return Unavailable(NO_OUTPUT_TOKENS, "no output token was counted in the case")
    return (energy_j - window.idle_power_w * window.window_s) / window.output_tokens


@dataclass(frozen=True)
class NoInput:
    """For formulas that read nothing but the values they depend on."""


NOTHING = NoInput()


def ttft_speedup(_: NoInput, baseline_ttft_s: float, ttft_s: float) -> float | Unavailable:
    return baseline_ttft_s / ttft_s


def ttft_saved(_: NoInput, baseline_ttft_s: float, ttft_s: float) -> float | Unavailable:
    return 1 - ttft_s / baseline_ttft_s
