"""Build a tiny random-weight multimodal projector (mmproj GGUF) for the tiny text model, so
that llama.cpp's server (its mtmd library) takes images offline (issue 56).

A LLaVA-1.5-shaped vision tower: a 56×56 input cut into 14-pixel patches (16 patches, so 16
image tokens a picture whatever its size: llama.cpp resizes every picture to the tower's
square), a class embedding, two ViT blocks of width 64, and the `mlp` projector (mm.0, GELU,
mm.2) onto the text model's 256 dimensions. Nothing is downloaded: seeded random weights,
written with the `gguf` package as tiny_model.py writes the text model. The weights mean
nothing; the server still decodes each picture (stb_image), resizes it, runs the tower and
prefills its tokens, which is what a benchmark of image requests measures.

Usage::

    python tests/realserver/tiny_mmproj.py OUT.gguf
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

SEED = 20261206
CONFIG = {
    "image_size": 56,
    "patch_size": 14,
    "n_embd": 64,  # the vision tower's width
    "n_ff": 128,
    "n_layer": 2,
    "n_head": 4,
    "projection_dim": 256,  # the text model's n_embd (tiny_model.CONFIG)
    "eps": 1e-5,
}


def tokens_per_image(cfg: dict = CONFIG) -> int:
    """The image tokens one picture becomes: the patch grid of the resized square."""
    return (cfg["image_size"] // cfg["patch_size"]) ** 2


def _weights(cfg: dict) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    E, F, P, D = cfg["n_embd"], cfg["n_ff"], cfg["patch_size"], cfg["projection_dim"]
    n_pos = tokens_per_image(cfg) + 1  # and the class token

    def mat(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w: dict[str, np.ndarray] = {
        "v.class_embd": mat(E),
        "v.patch_embd.weight": mat(E, 3, P, P),  # numpy (out, in, kh, kw) == ggml ne (kw, kh, in, out)
        "v.position_embd.weight": mat(n_pos, E),
        "v.pre_ln.weight": np.ones(E, dtype=np.float32),
        "v.pre_ln.bias": np.zeros(E, dtype=np.float32),
        "mm.0.weight": mat(D, E),
        "mm.0.bias": np.zeros(D, dtype=np.float32),
        "mm.2.weight": mat(D, D),
        "mm.2.bias": np.zeros(D, dtype=np.float32),
    }
    for i in range(cfg["n_layer"]):
        p = f"v.blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w[p + name + ".weight"], w[p + name + ".bias"] = mat(E, E), np.zeros(E, dtype=np.float32)
        w[p + "ffn_up.weight"], w[p + "ffn_up.bias"] = mat(F, E), np.zeros(F, dtype=np.float32)
        w[p + "ffn_down.weight"], w[p + "ffn_down.bias"] = mat(E, F), np.zeros(E, dtype=np.float32)
        for norm in ("ln1", "ln2"):
            w[p + norm + ".weight"], w[p + norm + ".bias"] = np.ones(E, dtype=np.float32), np.zeros(E, dtype=np.float32)
    return w


def build(path: str | os.PathLike, cfg: dict = CONFIG) -> Path:
    """Writes the projector to `path` (atomically) and returns it."""
    import gguf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        wr = gguf.GGUFWriter(tmp, "clip")
        wr.add_name("benchy-tiny-mmproj")
        wr.add_bool("clip.has_vision_encoder", True)
        wr.add_string("clip.projector_type", "mlp")
        wr.add_uint32("clip.vision.image_size", cfg["image_size"])
        wr.add_uint32("clip.vision.patch_size", cfg["patch_size"])
        wr.add_uint32("clip.vision.embedding_length", cfg["n_embd"])
        wr.add_uint32("clip.vision.feed_forward_length", cfg["n_ff"])
        wr.add_uint32("clip.vision.block_count", cfg["n_layer"])
        wr.add_uint32("clip.vision.attention.head_count", cfg["n_head"])
        wr.add_uint32("clip.vision.projection_dim", cfg["projection_dim"])
        wr.add_float32("clip.vision.attention.layer_norm_epsilon", cfg["eps"])
        wr.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
        wr.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
        wr.add_bool("clip.use_gelu", True)
        for name, arr in _weights(cfg).items():
            wr.add_tensor(name, arr.astype(np.float16) if arr.ndim >= 2 else arr)
        wr.write_header_to_file()
        wr.write_kv_data_to_file()
        wr.write_tensors_to_file()
        wr.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


if __name__ == "__main__":
    print(build(sys.argv[1]))
