"""`benchy run --help` in sections (server, workload, load, output, checks), not one list of
seventy flags.

Why click's own means (Command.format_options) and no library: click-option-group and
rich-click would each have every option re-declared through their decorators (the option
tuples are shared by run and capacity) or change the whole look of the help; a section is a
title over click's own rows, so ~30 lines do it. A flag's section is named here by its
parameter name; a flag named nowhere still shows, under "Options" (capacity's search, --help).
"""

from __future__ import annotations

import click

SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Server",
        (
            "base_url", "model", "api_key", "timeout", "stall_timeout", "insecure", "transport", "headers",
            "no_env_proxy", "extra_body", "endpoint", "no_server_metrics", "replicas", "gpu_metrics",
            "cache_reset", "reconnect_s",
        ),
    ),
    (
        "Workload",
        (
            "pp", "tg", "depth", "depth_mode", "scenario", "turns", "first_tokens", "think_time",
            "keep_reasoning", "cold_baseline", "shared_prefix", "groups", "trace_file", "speed", "dataset",
            "dataset_min_tokens", "dataset_max_tokens", "no_nonce", "no_stream", "tokenizer_file", "template",
            "reasoning_effort", "stop", "skip_unfit", "tools", "tool_choice", "pp_stddev", "tg_stddev",
            "subagents", "max_gap", "batch", "images", "image_size", "shared_images", "image_url",
        ),
    ),
    (
        "Load",
        (
            "concurrency", "rate", "max_inflight", "n_requests", "duration", "seed", "workers", "ray",
            "ray_workers_per_node", "runs", "warmup", "max_errors", "max_error_rate", "max_connect_failures",
            "drain", "saturation",
        ),
    ),
    ("Output", ("output", "force", "no_report", "fmt", "quiet", "view")),
    ("Checks", ("slo", "strict", "hardware", "model_profile", "bandwidth_gbs", "active_bytes_per_token", "canary")),
)  # fmt: skip
OTHER = "Options"


def section_of(name: str | None) -> str:
    return next((title for title, names in SECTIONS if name in names), OTHER)


class SectionedHelp(click.Command):
    """A command whose --help lists its options under SECTIONS' titles, in their order."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            row = param.get_help_record(ctx)
            if row is not None:
                rows.setdefault(section_of(param.name), []).append(row)
        for title in [t for t, _ in SECTIONS] + [OTHER]:
            if title in rows:
                with formatter.section(title):
                    formatter.write_dl(rows[title])
