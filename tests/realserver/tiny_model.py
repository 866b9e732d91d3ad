"""Build a tiny random-weight llama model in GGUF for tests against a real llama.cpp server.

Nothing is downloaded: the tokenizer is a byte-level BPE trained with ``tokenizers`` on a
corpus generated here from a fixed seed, and the weights are seeded random numbers. The
result is a few MB and takes a few seconds to build.

Properties the tests rely on (all by construction, see ``_weights``):

* The model never *samples* a token whose text is not complete UTF-8 on its own (lone
  bytes >= 0x80), nor a control token (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``).
  So every generated token is exactly one visible piece of text (one SSE content event per
  token), and generation always runs to ``max_tokens`` (EOS is never chosen). Prompts may
  still contain any text: the byte-level BPE encodes every byte sequence.
* Chat template: ChatML (``<|im_start|>role\\n...<|im_end|>\\n``), no BOS added.

Usage::

    python tests/realserver/tiny_model.py OUT.gguf     # prints OUT path, skips if up to date

``build(path)`` skips the work when ``path`` exists and its sidecar ``path + '.inputs-sha256'``
holds the hash of the generator inputs (this file's source, the config, and the versions of
gguf/tokenizers/numpy). Writes are atomic (temp file + rename), so concurrent builders are safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

SEED = 20240611

# Model shape. ~5 MB in f16; see the report in tests/realserver for measured speeds.
CONFIG = {
    "vocab_size": 2048,  # target for the BPE trainer (actual may be a little lower)
    "n_embd": 256,
    "n_layer": 4,
    "n_head": 4,
    "n_head_kv": 2,
    "n_ff": 512,
    "context_length": 32768,  # n_ctx_train; the server's n_ctx may be anything up to this
    "rope_freq_base": 10000.0,
    "rms_eps": 1e-5,
    # True: the corpus leaves out _SPLIT_WORDS, so the tokenizer splits them (issue 35: a
    # vocabulary that does not keep every common English word whole)
    "split_words": False,
}

BOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [BOS, IM_START, IM_END]

# ChatML. '\n' inside Jinja string literals is a newline. Accepted by llama.cpp's Jinja engine
# (use_jinja=True, the default) and recognised as "chatml" by its legacy template detector.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_WORDS = """
the of and to in is that for it as was with be by on not he this are or his from at which
but have an they you were her she there been one all we their has would when if so no what
up out about who them more some could into time only new other then these two may first
any like now my over such our man me even most made after also did many before must through
back years where much your way well down should because each just those people how too
little state good very make world still own see men work long get here between both life
being under never day same another know while last might us great old year off come since
against go came right used take three server token cache prompt model request latency
throughput stream batch queue slot context window prefix hit miss warm cold decode prefill
benchmark measure percentile report scenario session user system assistant message reply
answer question data table value result error retry timeout second minute rate load test
python function class return import print list dict string number file path line code run
""".split()

# Every other word of benchy's prompt filler (measure/tokenizer.py), written out here: this
# file builds models and imports nothing of benchy.
_SPLIT_WORDS = frozenset(
    "of to is for that as at his are which this not or first after two time they have other when only "
    "would into these while such year three made world about number people then being system life same long".split()
)

_PUNCT = [".", ".", ".", ",", ",", ",", ";", ":", "?", "!", " -", "'s", "(", ")", '"']

_CODE_LINES = [
    "def {w}_{v}(self, {x}):",
    "    return {x} + {n}",
    "    if {x} is None:",
    "        raise ValueError('{w} {v}')",
    "for {x} in range({n}):",
    "{w}_{v} = [{n}, {m}, {n}]",
    "    self.{w} = {{'{v}': {n}}}",
    'print(f"{{{w}}} {v}: {n}")',
    "import {w}",
    "# {w} {v} {x}",
]


def _corpus(seed: int = SEED, n_paragraphs: int = 1500, split_words: bool = False) -> list[str]:
    """Deterministic English-ish prose, numbers and Python-ish code lines (without
    _SPLIT_WORDS when `split_words`)."""
    rng = random.Random(seed)
    vocabulary = [w for w in _WORDS if w not in _SPLIT_WORDS] if split_words else _WORDS
    out: list[str] = []
    for _ in range(n_paragraphs):
        kind = rng.random()
        if kind < 0.75:
            sentences = []
            for _ in range(rng.randint(2, 6)):
                words = [rng.choice(vocabulary) for _ in range(rng.randint(4, 16))]
                if rng.random() < 0.3:
                    words.insert(rng.randrange(len(words)), str(rng.randint(0, 99999)))
                s = " ".join(words)
                s = s[0].upper() + s[1:] + rng.choice(_PUNCT[:3] + ["?", "!"])
                if rng.random() < 0.2:
                    i = s.find(" ")
                    s = s[:i] + rng.choice(_PUNCT[3:]) + s[i:]
                sentences.append(s)
            out.append(" ".join(sentences))
        else:
            lines = []
            for _ in range(rng.randint(2, 8)):
                tpl = rng.choice(_CODE_LINES)
                lines.append(
                    tpl.format(
                        w=rng.choice(vocabulary),
                        v=rng.choice(vocabulary),
                        x=rng.choice("xyzijk"),
                        n=rng.randint(0, 999),
                        m=rng.randint(0, 999),
                    )
                )
            out.append("\n".join(lines))
    return out


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode (what tokenizers' ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _train_tokenizer(vocab_size: int, split_words: bool = False):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    # GPT-2 split regex + byte mapping; llama.cpp's "gpt-2" pre-tokenizer uses the same regex.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(split_words=split_words), trainer=trainer)
    vocab = tok.get_vocab()  # token string -> id (byte-level mapped strings)
    n = len(vocab)
    tokens = [None] * n
    for s, i in vocab.items():
        tokens[i] = s
    assert all(t is not None for t in tokens), "token ids are not contiguous"
    merges_raw = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in merges_raw]
    return tokens, merges


def _weights(tokens: list[str], cfg: dict) -> dict[str, np.ndarray]:
    """Random weights, with one trick: hidden dimension 0 is a constant "bias" channel.

    Token embeddings carry 1.0 in dim 0, every residual write (attn_output, ffn_down) has a
    zero row 0 and every read (q/k/v/gate/up) a zero column 0, so after the final RMS norm
    dim 0 is always positive. ``output.weight[t, 0] = -1000`` then pushes token t's logit to
    about -1000 for every input: such tokens are never sampled (see module docstring).
    """
    rng = np.random.default_rng(SEED)
    V, E, F, L = len(tokens), cfg["n_embd"], cfg["n_ff"], cfg["n_layer"]
    hd = E // cfg["n_head"]
    kv = hd * cfg["n_head_kv"]

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    dec = _byte_decoder()
    banned = np.zeros(V, dtype=bool)
    for i, t in enumerate(tokens):
        if t in SPECIAL_TOKENS:
            banned[i] = True
            continue
        try:
            bytes(dec[c] for c in t).decode("utf-8")
        except UnicodeDecodeError:
            banned[i] = True

    w: dict[str, np.ndarray] = {}
    emb = mat(V, E, 1.0)
    emb[:, 0] = 1.0
    w["token_embd.weight"] = emb
    for layer in range(L):
        p = f"blk.{layer}."
        w[p + "attn_norm.weight"] = np.ones(E, dtype=np.float32)
        w[p + "ffn_norm.weight"] = np.ones(E, dtype=np.float32)
        # numpy shape (out, in) == ggml ne (in, out)
        q, k, v = mat(E, E, E**-0.5), mat(kv, E, E**-0.5), mat(kv, E, E**-0.5)
        o = mat(E, E, 0.5 * E**-0.5)
        gate, up = mat(F, E, E**-0.5), mat(F, E, E**-0.5)
        down = mat(E, F, 0.5 * F**-0.5)
        for m in (q, k, v, gate, up):
            m[:, 0] = 0.0
        for m in (o, down):
            m[0, :] = 0.0
        w[p + "attn_q.weight"], w[p + "attn_k.weight"], w[p + "attn_v.weight"] = q, k, v
        w[p + "attn_output.weight"] = o
        w[p + "ffn_gate.weight"], w[p + "ffn_up.weight"], w[p + "ffn_down.weight"] = gate, up, down
    w["output_norm.weight"] = np.ones(E, dtype=np.float32)
    out = mat(V, E, 2.0 * E**-0.5)  # logit std ~2: varied but not uniform sampling
    out[:, 0] = np.where(banned, -1000.0, 0.0)
    w["output.weight"] = out
    return w


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


def inputs_hash(config: dict | None = None) -> str:
    """Hash of everything the output depends on: this source, config, library versions."""
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(
        json.dumps(
            [{**CONFIG, **(config or {})}, SEED, _version("gguf"), _version("tokenizers"), _version("numpy")],
            sort_keys=True,
        ).encode()
    )
    return h.hexdigest()


def build(path: str | os.PathLike, force: bool = False, config: dict | None = None) -> Path:
    """Write the tiny model to ``path`` (unless already up to date); return the path.

    ``config`` overrides keys of :data:`CONFIG` (e.g. ``{"n_embd": 512}`` for a slower model).
    """
    import gguf

    path = Path(path)
    stamp = path.with_name(path.name + ".inputs-sha256")
    unknown = set(config or {}) - set(CONFIG)
    if unknown:
        raise ValueError(f"unknown config keys: {sorted(unknown)}")
    cfg = {**CONFIG, **(config or {})}
    digest = inputs_hash(cfg)
    if not force and path.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)

    tokens, merges = _train_tokenizer(cfg["vocab_size"], cfg["split_words"])
    weights = _weights(tokens, cfg)
    token_types = [int(gguf.TokenType.CONTROL) if t in SPECIAL_TOKENS else int(gguf.TokenType.NORMAL) for t in tokens]

    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        wr = gguf.GGUFWriter(tmp, "llama")
        wr.add_name("benchy-tiny-random")
        wr.add_string("benchy.tiny_model.inputs_sha256", digest)
        wr.add_context_length(cfg["context_length"])
        wr.add_embedding_length(cfg["n_embd"])
        wr.add_block_count(cfg["n_layer"])
        wr.add_feed_forward_length(cfg["n_ff"])
        wr.add_head_count(cfg["n_head"])
        wr.add_head_count_kv(cfg["n_head_kv"])
        wr.add_rope_dimension_count(cfg["n_embd"] // cfg["n_head"])
        wr.add_rope_freq_base(cfg["rope_freq_base"])
        wr.add_layer_norm_rms_eps(cfg["rms_eps"])
        wr.add_vocab_size(len(tokens))
        wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

        wr.add_tokenizer_model("gpt2")
        wr.add_tokenizer_pre("gpt-2")
        wr.add_token_list(tokens)
        wr.add_token_types(token_types)
        wr.add_token_merges(merges)
        wr.add_bos_token_id(tokens.index(BOS))
        wr.add_eos_token_id(tokens.index(IM_END))
        wr.add_eot_token_id(tokens.index(IM_END))
        wr.add_pad_token_id(tokens.index(BOS))
        wr.add_add_bos_token(False)
        wr.add_add_eos_token(False)
        wr.add_chat_template(CHAT_TEMPLATE)

        for name, arr in weights.items():
            if arr.ndim == 2:
                arr = arr.astype(np.float16)
            wr.add_tensor(name, arr)
        wr.write_header_to_file()
        wr.write_kv_data_to_file()
        wr.write_tensors_to_file()
        wr.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    stamp_tmp = stamp.with_name(stamp.name + f".{os.getpid()}.tmp")
    stamp_tmp.write_text(digest + "\n")
    os.replace(stamp_tmp, stamp)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    force = "--force" in argv
    args = [a for a in argv if a != "--force"]
    if len(args) != 1:
        print("usage: python tests/realserver/tiny_model.py [--force] OUT.gguf", file=sys.stderr)
        return 2
    print(build(args[0], force=force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
