"""The tool-call table of docs/tools.md: one request a row, each API streamed and whole, against a
llama.cpp server started with tools_template.jinja:

    python tests/realserver/serve.py --model tiny.gguf --port 8091 --parallel 2 \
        --chat-template-file tests/realserver/tools_template.jinja &
    python tests/realserver/measure_tools.py http://127.0.0.1:8091/v1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchy.measure import reading  # noqa: E402
from tests.realserver.test_tools_realserver import OPENED, send  # noqa: E402


class Server:
    def __init__(self, base_url: str) -> None:
        self.base_url, self.model = base_url, None


def main(base_url: str) -> None:
    for api in ("chat", "responses", "messages"):
        for stream in (True, False):
            rec = send(Server(base_url), api, stream, OPENED)
            count = reading.read(rec).count
            predicted = (rec.server_timings or {}).get("predicted_n")
            print(
                f"{api:9} {'streamed' if stream else 'whole':8} ok={rec.ok} events={len(rec.token_event_s)} "
                f"calls={rec.tool_calls} tool_chars={rec.tool_chars} usage={rec.completion_tokens} "
                f"predicted_n={predicted} benchy={count.tokens} backed_by={list(count.backed_by)} "
                f"finish={rec.finish_reason}"
            )


if __name__ == "__main__":
    main(sys.argv[1])
