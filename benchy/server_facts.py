"""What the run's connect phase learns of the server before anything is measured: its model
and identity, its /metrics (behind a router, each replica's) and the one-line version the setup
keeps. Its own module because these read the server through the client and derive nothing from
the run's state: benchy/run.py asks for them and keeps them in its phases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from benchy.client.client import Client
from benchy.client.redact import redact_url
from benchy.server import identity as server_mod
from benchy.server import metrics as server_metrics
from benchy.server import router


@dataclass(frozen=True)
class ServerFacts:
    """What the connect phase learnt of the server: its model, identity and /metrics (scraper: None if none)."""

    model: str
    identity: server_mod.ServerIdentity
    metrics: server_metrics.MetricsStatus
    scraper: server_metrics.MetricsScraper | None


async def metrics_scraper(
    client: Client, model: str, wanted: bool, named: tuple[str, ...] = ()
) -> tuple[server_metrics.MetricsScraper | None, server_metrics.MetricsStatus]:
    """/metrics of the server, or behind a router of every replica (those the user named with
    --replica, else those the router's own page names: server/router.py)."""
    url = f"{server_mod.root_url(client.base)}/metrics"
    if not wanted:
        return None, server_metrics.MetricsStatus(url, False, reason="turned off with --no-server-metrics")
    named_by, replicas = ("--replica", [r.rstrip("/") for r in named]) if named else (None, [])
    if not named:
        named_by, replicas = await router.replicas_named(client, server_mod.root_url(client.base))
    scraper = server_metrics.MetricsScraper(client, url, model, [f"{r}/metrics" for r in replicas])
    probed = await scraper.probe()
    # the connect phase adds what named the replicas, and shows their URLs without secrets
    status = replace(probed, router=named_by, replicas=[redact_url(r) for r in probed.replicas])
    return (scraper if status.available else None), status


def version_text(identity: server_mod.ServerIdentity) -> str | None:
    """setup.server_version as before issue 17: one line, e.g. 'vLLM 0.11.0'."""
    known = identity.engine or identity.version or identity.build or identity.server_header
    return identity.engine_version if known else None
