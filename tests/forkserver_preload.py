"""What every forked simulator and child benchy would import anyway, imported once by the test
process's forkserver (tests/forkserver.py): benchy's command line, the simulator's server and
aiohttp, a run's stages and its event loop (uvloop: the module only, so that each child still
reads BENCHY_EVENT_LOOP itself), the o200k vocabulary and the report's matplotlib."""

import benchy.cli  # noqa: F401
import benchy.report.render  # noqa: F401
import benchy.run  # noqa: F401
import benchy.sim.app  # noqa: F401
import benchy.sim.cli  # noqa: F401
from benchy.measure import tokenizer

try:
    import uvloop  # noqa: F401
except ImportError:  # a platform without it: benchy runs on asyncio's loop
    pass

tokenizer.encoding()
