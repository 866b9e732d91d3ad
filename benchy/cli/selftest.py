"""`benchy selftest`: this machine's client ceiling."""

from __future__ import annotations

import click


@click.command()
@click.option("--seconds", type=click.FloatRange(0.2, 60), default=1.5, show_default=True, help="Seconds per phase.")
@click.option("--streams", type=click.IntRange(1, 4096), default=64, show_default=True, help="Requests in flight.")
def selftest(seconds: float, streams: int) -> None:
    """This machine's client ceiling against a loopback stub: requests/s, SSE events/s and stamp
    lag, in seconds. Cached per host; every later run saves it in its setup and flags a case
    that drives more than half of it as client-bound."""
    from benchy.load import selftest as client_ceiling
    from benchy.measure.selftest import save

    try:
        found = client_ceiling.measure(streams, seconds)
        path = save(found)
    except (OSError, RuntimeError) as exc:
        raise click.ClickException(f"selftest: {exc}") from None
    click.echo(
        f"client ceiling of {found.host} ({found.event_loop}, {streams} streams): "
        f"{found.requests_per_s:,.0f} requests/s, {found.events_per_s:,.0f} SSE events/s, "
        f"stamp lag p50 {found.stamp_lag_ms_p50:.2f} ms, p99 {found.stamp_lag_ms_p99:.2f} ms"
    )
    click.echo(f"saved: {path}")
