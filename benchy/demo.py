"""`benchy demo`: the main job against the embedded simulator, for a newcomer without a GPU."""
from __future__ import annotations

from benchy.sim.process import SimProcess

DEMO_PRESET = "dgx-spark-gpt-oss-120b"


def simulator(preset: str = DEMO_PRESET) -> SimProcess:
    return SimProcess("--preset", preset)
