"""Build a tiny random cross-encoder (tiny_hf_model.py's Llama with a one-score head) that vLLM
serves as a pooling model on /v1/rerank, with the Python that has vLLM:

    .venv-vllm/bin/python tests/vllmserver/tiny_rerank_model.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_hf_model import build  # noqa: E402  (run as a script by the vLLM Python)

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_rerank_model.py OUT_DIR")
    print(build(Path(sys.argv[1]), scorer=True))
