"""Build a tiny random-weight Llama in Hugging Face format for a real vLLM server on CPU.

Run with the Python that has vLLM (it brings torch, transformers and tokenizers):

    .venv-vllm/bin/python tests/vllmserver/tiny_hf_model.py OUT_DIR [tools]

(`tools`: the Hermes call tags as tokens and a chat template with tools, for tool calls.)
Nothing is downloaded. The tokenizer is a byte-level BPE trained on the same generated corpus
as the llama.cpp test model (tests/realserver/tiny_model.py), but without the full byte
alphabet: every token is complete ASCII text, so vLLM's incremental detokenizer never holds a
token back and every generated token is one streamed event. As there, hidden dimension 0 is a
constant channel that lets the output layer rule out special tokens (and <unk>), so the model
never samples one. Shape: 2 layers, hidden 128, 2 heads of 64 (a head size vLLM's CPU
attention supports), float32. About 2 MB; seconds to build.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20240611
UNK = "<unk>"
# The Hermes call tags (tools=True): the corpus has no `<`, `>` or `/`, so without them as tokens
# no output could spell a call and vLLM's tool grammar would leave no token allowed.
TOOL_TAGS = ("<tool_call>", "</tool_call>")
TOOLS_TEMPLATE = HERE.parent / "realserver" / "tools_template.jinja"


def _realserver_model():
    """tests/realserver/tiny_model.py, by path: its corpus, special tokens and chat template."""
    spec = importlib.util.spec_from_file_location("benchy_tiny_model", HERE.parent / "realserver" / "tiny_model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tokenizer(tiny, tools: bool = False):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048, min_frequency=2, special_tokens=[*tiny.SPECIAL_TOKENS, UNK], show_progress=False
    )
    tok.train_from_iterator(tiny._corpus(), trainer=trainer)
    if tools:
        tok.add_tokens([AddedToken(tag, normalized=False, special=False) for tag in TOOL_TAGS])
    return tok


def build(out: Path, scorer: bool = False, tools: bool = False) -> Path:
    """scorer: a cross-encoder instead (one relevance score from the last token, as vLLM serves
    a LlamaForSequenceClassification on /v1/rerank; tiny_rerank_model.py). tools: the Hermes
    call tags as tokens and the tools chat template (`tiny_hf_model.py OUT_DIR tools`)."""
    import torch
    from transformers import LlamaForCausalLM, LlamaForSequenceClassification

    tiny = _realserver_model()
    tok = _tokenizer(tiny, tools)
    vocab = tok.get_vocab()
    template = TOOLS_TEMPLATE.read_text() if tools else tiny.CHAT_TEMPLATE
    fast = fast_tokenizer(tiny, tok, template)
    config = text_config(tiny, vocab, scorer)
    torch.manual_seed(SEED)
    if scorer:
        model = LlamaForSequenceClassification(config)
    else:
        model = LlamaForCausalLM(config)
        _rule_out(model, [vocab[t] for t in (*tiny.SPECIAL_TOKENS, UNK)])
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    fast.save_pretrained(out)
    return out


def fast_tokenizer(tiny, tok, template: str):
    """The trained tokenizer as transformers' fast tokenizer, the tiny model's specials named."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=tiny.BOS, eos_token=tiny.IM_END, unk_token=UNK, pad_token=tiny.BOS,
        chat_template=template,
    )  # fmt: skip


def text_config(tiny, vocab: dict, scorer: bool = False):
    """The text model's shape: 2 layers, hidden 128, 2 heads of 64 (one KV head), float32; a
    scorer (a cross-encoder) has one label, its relevance score."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(vocab), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
        bos_token_id=vocab[tiny.BOS], eos_token_id=vocab[tiny.IM_END], pad_token_id=vocab[tiny.BOS],
        tie_word_embeddings=False, torch_dtype="float32", **({"num_labels": 1} if scorer else {}),
    )  # fmt: skip


def _rule_out(model, banned: list[int]) -> None:
    """Dimension 0 of the residual stream stays 1 (embeddings carry it, no layer reads or
    writes it), so after the final norm it is positive and lm_head[t, 0] = -1000 keeps token
    t's logit near -1000 whatever the input."""
    import torch

    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 1.0
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            for reader in (attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj):
                reader.weight[:, 0] = 0.0
            for writer in (attn.o_proj, mlp.down_proj):
                writer.weight[0, :] = 0.0
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[banned, 0] = -1000.0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["tools"]):
        sys.exit("usage: tiny_hf_model.py OUT_DIR [tools]")
    print(build(Path(sys.argv[1]), tools=sys.argv[2:] == ["tools"]))
