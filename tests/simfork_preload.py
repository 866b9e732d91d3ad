"""What every forked simulator would import anyway, imported once by the test process's
forkserver (tests/simfork.py): benchy's command line, the simulator's server and aiohttp."""

import benchy.cli  # noqa: F401
import benchy.sim.app  # noqa: F401
import benchy.sim.cli  # noqa: F401
import benchy.sim.engine  # noqa: F401
