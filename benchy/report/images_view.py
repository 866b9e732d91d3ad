"""The images' figures (`--images`, a dataset's images) beside the text's, for the terminal and
report.md: what each case sent, and the image tokens the server counted next to the text's
prompt tokens. Reads the saved results only (case.images, measure/images.py)."""

from __future__ import annotations

from benchy.results.types import RunResult

_FROM = {"server": "the server's own count", "usage_minus_text": "usage − the exact text"}


def lines(results: RunResult) -> list[str]:
    """A short table, one row per case with images; nothing for a run without any."""
    rows = [(c.label, c.images) for c in results.cases if c.images is not None]
    if not rows:
        return []
    shape = results.setup.load.images if results.setup.load else None
    size = f"{shape.width}x{shape.height} PNG, " if shape else ""
    out = [
        f"Images ({size}tokens as the server counted them):",
        "",
        "| test | images/request | KB/request | image tokens | text prompt tokens | from |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, figures in rows:
        tokens = "n/a" if figures.image_tokens is None else f"{figures.image_tokens:,.0f}"
        text = "n/a" if figures.text_prompt_tokens is None else f"{figures.text_prompt_tokens:,.0f}"
        kb = "n/a" if figures.image_bytes is None else f"{figures.image_bytes / 1000:,.1f}"
        source = " + ".join(_FROM.get(s, s) for s in (figures.image_tokens_from or "").split("+") if s) or (
            "not counted: the server gave no image count and the prompt has no exact length"
        )
        out.append(f"| {label} | {figures.images_per_request} | {kb} | {tokens} | {text} | {source} |")
    return [*out, ""]
