"""How benchy's own token counts map onto a server's: one typed model, made by the load stage.

Why one: the live run fitted a `Calibration` (prompts.calibrate) and the setup saved another
class of other field names (overhead vs overhead_tokens, a dict vs a typed LengthCheck), the
first turned into a dict to be parsed into the second. Now the class the run fits is the class
results.json's setup holds (results/setup.py re-exports it); its saved form is `saved()`, the
same class with its figures rounded as they are shown, and what only the live run needs (the
one-token words) is left out of the JSON (lengths.PromptLengths).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.load.lengths import PromptLengths
from benchy.measure.evidence import EXACT_PROMPT_SLACK
from benchy.records.plan import RequestTags


class PromptError(ValueError):
    """A prompt that cannot be built (e.g. shorter than the chat template)."""


CALIBRATION_LOCAL_TOKENS = (64, 1024)  # the filler of the short and the long calibration prompt
OUTPUT_CALIBRATION_TOKENS = 64  # the calibration answer's max_tokens (prompts.output_scale)
_ESTIMATE = PromptLengths()  # no words fitted: benchy's o200k count, calibrated


@dataclass(frozen=True)
class LengthCheck(Saved):
    """Calibration's count of the run's longest prompt (prompts.check_length): a server that
    does not read long prompts whole shows here."""

    target_tokens: int | None = None
    server_tokens: int | None = _opt("what the server counted; absent when the request failed", omit=True)
    missed: bool | None = _opt("the count fell short of the target", omit=True)
    error: str | None = _opt("why the check request failed", omit=True)


@dataclass(frozen=True)
class Calibration(Saved):
    """How benchy's own token counts map onto the server's for one endpoint (prompts.py).

    Fitted by prompts.calibrate (the server sees scale × local + overhead_tokens), checked by
    prompts.check_length; the output scale counts streamed text locally (records.local_token_scale)."""

    overhead_tokens: float = _opt("server tokens added around the user text (the chat template)", 0.0)
    scale: float = _opt("server tokens per local (o200k) token", 1.0)
    method: str = _opt("usage | none", "none")
    length_check: LengthCheck | None = _opt("the run's longest prompt, counted by the server", omit=True)
    # From the server's /tokenize of an answer, else its usage, else the tokens an answer that
    # ended by length was known to make (a model's words are not the filler's).
    output_scale: float | None = _opt("server tokens per local token of output text", omit=True)
    output_method: str | None = _opt("max_tokens | tokenize | usage", omit=True)
    # usage checked against a count known without it (issue 52: a witness on usage wherever
    # the stream has none)
    output_usage: int | None = _opt("(1.26) usage's count of that answer where it ended by length", omit=True)
    lengths: PromptLengths | None = _opt("(1.16) how prompt lengths were made", omit=True)

    def saved(self) -> Calibration:
        """As results.json keeps it: overhead to 0.01 token, scales to 5 decimals (a fit's last
        digits are noise, and the saved file reads back equal to what a report was made from)."""
        out = self.output_scale
        return replace(
            self,
            overhead_tokens=round(self.overhead_tokens, 2),
            scale=round(self.scale, 5),
            output_scale=None if out is None else round(out, 5),
            output_method=None if out is None else self.output_method,
            lengths=replace(self.length_source, one_token=None, nonce_words=None),  # their count is kept
        )

    @property
    def length_source(self) -> PromptLengths:
        """How its prompts' lengths are made: `lengths`, else the o200k estimate (none fitted)."""
        return self.lengths or _ESTIMATE

    @property
    def prompt_slack(self) -> int | None:
        """How far the server's count of a prompt may be from its target (records.prompt_slack)."""
        return EXACT_PROMPT_SLACK if self.length_source.words is not None else None

    @property
    def text_scale(self) -> float:
        """The scale for counting streamed output locally: the output's, else the prompts'."""
        return self.output_scale or self.scale

    @property
    def text_scale_from_usage(self) -> bool:
        """Whether text_scale was fitted on usage's completion count (no /tokenize answered)."""
        return self.output_scale is not None and self.output_method == "usage"

    @property
    def text_scale_generated(self) -> bool:
        """Whether text_scale was fitted on the tokens a calibration answer was known to generate
        (it ended by length at its max_tokens): neither usage nor the server's /tokenize."""
        return self.output_scale is not None and self.output_method == "max_tokens"

    def tags(self, **more: Any) -> RequestTags:
        """A planned request's tags (`more`) with the scale of its local count, and what it was fitted on."""
        return RequestTags(
            local_token_scale=self.text_scale,
            local_scale_from_usage=self.text_scale_from_usage,
            local_scale_generated=self.text_scale_generated,
            usage_at_known=self.usage_at_known,
            **more,
        )

    @property
    def usage_at_known(self) -> float | None:
        """usage's claim over the tokens the calibration answer was known to make (1: honest);
        None where no answer ended by length or usage said nothing of it."""
        if not self.text_scale_generated or not self.output_usage:
            return None
        return self.output_usage / OUTPUT_CALIBRATION_TOKENS

    @classmethod
    def fit(cls, local: tuple[int, int], server: tuple[int, int]) -> Calibration:
        """Two points (local count, server count) → the line through them."""
        if local[1] == local[0]:
            raise PromptError("calibration needs two prompts of different lengths")
        scale = (server[1] - server[0]) / (local[1] - local[0])
        if scale <= 0:
            raise PromptError(f"server token counts do not grow with the prompt ({server[0]} → {server[1]})")
        return cls(overhead_tokens=server[0] - scale * local[0], scale=scale, method="usage")

    def local_tokens_for(self, server_target: int) -> int:
        return round((server_target - self.overhead_tokens) / self.scale)

    def covers(self, server_tokens: int) -> bool:
        """Whether the long calibration prompt was at least this long (so it was checked)."""
        return server_tokens <= self.overhead_tokens + self.scale * CALIBRATION_LOCAL_TOKENS[1]
