"""Build tiny_hf_model.py's random Llama for tool calls: its tokenizer given the Hermes call tags
(<tool_call>, </tool_call>) as tokens and its chat template the tools one llama.cpp's tests use
(tests/realserver/tools_template.jinja), with the Python that has vLLM:

    .venv-vllm/bin/python tests/vllmserver/tiny_tool_model.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_hf_model import build  # noqa: E402  (run as a script by the vLLM Python)

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_tool_model.py OUT_DIR")
    print(build(Path(sys.argv[1]), tools=True))
