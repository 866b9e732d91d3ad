"""benchy's own o200k vocabulary as a Hugging Face `tokenizer.json`, for llama-benchy.

llama-benchy loads the served model's tokenizer (`tokenizers.Tokenizer.from_file`) to cut its
prompts; benchy loads o200k (gpt-oss's, 200,000 tokens) in every run. A benchmark of the two
against the simulator must give llama-benchy a tokenizer of a real model's size too, or its
CPU-seconds leave out what a user's run of it pays (a 2,000-word toy loads in a few ms; this
one in most of a CPU-second). Offline: built from the vocabulary benchy ships (byte-level BPE,
merges derived from the ranks as tiktoken's own BPE applies them), once per folder.
"""

from __future__ import annotations

import json
from pathlib import Path


def o200k_tokenizer_json(folder: Path) -> Path:
    """A folder holding tokenizer.json for o200k_base (made on the first call)."""
    out = folder / "o200k-tokenizer"
    path = out / "tokenizer.json"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_tokenizer()))
    return out


def _tokenizer() -> dict:
    from benchy.measure import tokenizer

    ranks = tokenizer._ranks()
    shown = _byte_chars()

    def text(token: bytes) -> str:
        return "".join(shown[b] for b in token)

    merges = [f"{text(a)} {text(b)}" for a, b in _merges(ranks)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": tokenizer._O200K_PAT}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": {text(token): rank for token, rank in ranks.items()},
            "merges": merges,
        },
    }


def _merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Each multi-byte token, in rank order, as the two parts that tiktoken's BPE joins last to
    make it: its bytes merged pair by pair, lowest rank first, with only tokens ranked below it."""
    found = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) > 1:
            parts = _bpe(token, ranks, rank)
            if len(parts) == 2:
                found.append((parts[0], parts[1]))
    return found


def _bpe(token: bytes, ranks: dict[bytes, int], below: int) -> list[bytes]:
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        pairs = [(ranks.get(a + b, below), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
        best, i = min(pairs)
        if best >= below:
            break
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte as a printable character (what ByteLevel uses)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    moved = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + i) for i, b in enumerate(moved)}}
