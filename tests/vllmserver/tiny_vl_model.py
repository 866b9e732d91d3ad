"""Build a tiny random-weight LLaVA (a CLIP vision tower, a projector and a Llama text model)
in Hugging Face format, for a real vLLM server on CPU: images go through vLLM's real multimodal
processor (CLIP's: resize and crop to the tower's size, normalise) and its real encoder, so the
image tokens vLLM counts and its processor and encoder caches are the engine's own. Nothing is
downloaded; the tokenizer is trained here, as tiny_hf_model.py's is.

    .venv-vllm/bin/python tests/vllmserver/tiny_vl_model.py OUT_DIR

LLaVA (not Qwen2-VL): its processor needs no torchvision, which the CPU venv cannot import.
Every image costs (IMAGE_SIZE / PATCH)^2 = 16 prompt tokens whatever its size.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261206
IMAGE_TOKEN = "<image>"
IMAGE_SIZE, PATCH = 56, 14
# LLaVA's way of writing an image into the prompt, over the tiny model's ChatML.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% else %}<image>\n{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(out: Path) -> Path:
    import torch
    from tokenizers import AddedToken
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    text_model = _load("benchy_tiny_hf", HERE / "tiny_hf_model.py")
    tiny = text_model._realserver_model()
    tok = text_model._tokenizer(tiny)
    tok.add_special_tokens([AddedToken(IMAGE_TOKEN, special=True, normalized=False)])
    vocab = tok.get_vocab()
    fast = text_model.fast_tokenizer(tiny, tok, CHAT_TEMPLATE)
    text = text_model.text_config(tiny, vocab)
    vision = CLIPVisionConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
        projection_dim=128,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=vocab[IMAGE_TOKEN],
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        image_seq_length=(IMAGE_SIZE // PATCH) ** 2,
        tie_word_embeddings=False,
    )
    torch.manual_seed(SEED)
    model = LlavaForConditionalGeneration(config).to(torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    _as_llava_hf(out / "model.safetensors")
    images = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=fast,
        chat_template=CHAT_TEMPLATE,
        patch_size=PATCH,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    processor.save_pretrained(out)
    return out


def _as_llava_hf(path: Path) -> None:
    """transformers 5 saves the CLIP tower's weights without its `vision_model.` level; llava-hf's
    checkpoints (and vLLM's loader) have it."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), "pt") as f:
        tensors = {_llava_hf_name(k): f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def _llava_hf_name(key: str) -> str:
    tower = "vision_tower."
    if key.startswith(tower) and not key.startswith(tower + "vision_model."):
        return tower + "vision_model." + key[len(tower) :]
    return key


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_vl_model.py OUT_DIR")
    print(build(Path(sys.argv[1])))
