"""Bandwidth-ceiling model: profile figures, formulas, lookups."""

from __future__ import annotations

import dataclasses
from importlib import resources

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest

from benchy.measure.profiles import (
    Ceiling,
    ProfileError,
    case_ceiling,
    custom_ceiling,
    decode_ceiling_tps,
    guess_model_profile,
    hardware,
    hardware_names,
    kv_bytes_per_token,
    model_names,
    model_profile,
)

GB10 = 273.0


def gpt_oss_params(layers: int, experts: int) -> tuple[int, int]:
    """(BF16 params, MXFP4 params) read per token, from the published gpt-oss architecture."""
    hidden, q_dim, kv_dim, inter, vocab, top_k, heads = 2880, 64 * 64, 8 * 64, 2880, 201088, 4, 64
    attention = hidden * q_dim + 2 * hidden * kv_dim + q_dim * hidden + q_dim + 2 * kv_dim + hidden + heads
    router = hidden * experts + experts
    expert_weights = hidden * 2 * inter + inter * hidden
    expert_biases = 2 * inter + hidden
    lm_head = vocab * hidden
    bf16 = layers * (attention + router + top_k * expert_biases) + lm_head
    mxfp4 = layers * top_k * expert_weights
    return bf16, mxfp4


def gpt_oss_weight_bytes(layers: int, experts: int) -> float:
    """Bytes the published checkpoint reads per token (see profiles.toml)."""
    bf16, mxfp4 = gpt_oss_params(layers, experts)
    return bf16 * 2 + mxfp4 * 4.25 / 8


def toml_entry(name: str) -> dict:
    text = resources.files("benchy").joinpath("data/profiles.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["models"][name]


def gpt_oss_120b_on_gb10(pp: int = 0, tg: int = 1, depth: int = 0) -> Ceiling:
    return case_ceiling(hardware("gb10").bandwidth_gbs, model_profile("gpt-oss-120b"), pp, tg, depth)


# ------------------------------------------------------------------ profile figures


@pytest.mark.parametrize("name, layers, experts", [("gpt-oss-120b", 36, 128), ("gpt-oss-20b", 24, 32)])
def test_gpt_oss_bytes_match_the_architecture(name, layers, experts):
    # The ceiling uses every active parameter at 4 bits (the least any build reads); the
    # published checkpoint's larger figure is documented alongside.
    assert model_profile(name).active_bytes_per_token == sum(gpt_oss_params(layers, experts)) / 2
    assert toml_entry(name)["checkpoint_bytes_per_token"] == gpt_oss_weight_bytes(layers, experts)


def test_gpt_oss_120b_bound_is_the_issue_2_5_gb_and_below_the_5_gb_checkpoint():
    bound = model_profile("gpt-oss-120b").active_bytes_per_token
    assert bound == pytest.approx(2.5e9, rel=0.03)  # 5.13 B active params × 4 bits
    assert toml_entry("gpt-oss-120b")["checkpoint_bytes_per_token"] == pytest.approx(5.0e9, rel=0.01)


def test_llama_3_8b_reads_its_bf16_weights_except_the_embedding_table():
    read = model_profile("llama-3-8b").active_bytes_per_token
    embedding_table = 128256 * 4096 * 2
    assert read + embedding_table == pytest.approx(8.03e9 * 2, rel=0.001)


@pytest.mark.parametrize(
    "name, gbs",
    [
        ("gb10", 273),
        ("dgx-spark", 273),
        ("h100-sxm", 3350),
        ("h200", 4800),
        ("b200", 8000),
        ("rtx-5090", 1792),
        ("m3-ultra", 819),
        ("mi300x", 5300),
    ],
)
def test_hardware_bandwidths(name, gbs):
    assert hardware(name).bandwidth_gbs == gbs


def test_every_hardware_profile_says_where_its_figure_comes_from():
    assert all(hardware(n).note for n in hardware_names())


# ------------------------------------------------------------------ ceilings


def test_gpt_oss_120b_on_gb10_is_about_100_tok_s_at_short_context():
    assert 100 <= gpt_oss_120b_on_gb10(pp=16, tg=16).tokens_per_s <= 110


def test_reported_real_spark_decode_rates_stay_under_the_ceiling():
    # ~59 tok/s single-stream decode is reported for MXFP4-everywhere builds: a bound that
    # flagged it would break the promise the other way.
    assert gpt_oss_120b_on_gb10(pp=2048, tg=128).percent_of(60.0) < 100


def test_ceiling_falls_with_context():
    rates = [gpt_oss_120b_on_gb10(pp=512, tg=128, depth=d).tokens_per_s for d in (0, 4096, 32768, 131072)]
    assert rates == sorted(rates, reverse=True)
    assert rates[-1] < 0.6 * rates[0]


def test_seed_harness_figures_are_impossible_and_37_is_plausible():
    ceiling = gpt_oss_120b_on_gb10(pp=420, tg=1024)
    assert ceiling.percent_of(772) > 100
    assert ceiling.percent_of(198) > 100
    assert 30 <= ceiling.percent_of(37.0) <= 40  # ≈ 35%


def test_ceiling_uses_the_mid_decode_context():
    ceiling = gpt_oss_120b_on_gb10(pp=1000, tg=200, depth=3000)
    assert ceiling.context_tokens == 3000 + 1000 + 100
    assert ceiling.kv_bytes_per_token == kv_bytes_per_token(model_profile("gpt-oss-120b"), 4100)


def test_decode_ceiling_formula():
    assert decode_ceiling_tps(100, 1e9) == pytest.approx(100)
    assert decode_ceiling_tps(100, 1e9, kv_bytes=1e9) == pytest.approx(50)


@pytest.mark.parametrize("args", [(0, 1e9), (-1, 1e9), (100, 0), (100, 1e9, -5)])
def test_decode_ceiling_rejects_impossible_inputs(args):
    with pytest.raises(ProfileError):
        decode_ceiling_tps(*args)


def test_case_ceiling_rejects_no_generated_tokens():
    with pytest.raises(ProfileError):
        gpt_oss_120b_on_gb10(pp=10, tg=0)


def test_custom_ceiling_has_no_kv_term():
    short = custom_ceiling(GB10, 2.5e9, pp=128, tg=128)
    deep = custom_ceiling(GB10, 2.5e9, pp=128, tg=128, depth=100_000)
    assert short.tokens_per_s == deep.tokens_per_s == pytest.approx(109.2)
    assert deep.kv_bytes_per_token == 0


# ------------------------------------------------------------------ KV cache


def test_kv_bytes_for_dense_llama():
    llama = model_profile("llama-3-8b")
    per_token = 32 * 2 * 8 * 128 * 2
    assert kv_bytes_per_token(llama, 1000) == 1000 * per_token


def test_sliding_window_halves_kv_growth_for_gpt_oss():
    gpt_oss = model_profile("gpt-oss-120b")
    full_kv = dataclasses.replace(gpt_oss.kv, sliding_window=None, sliding_window_layer_fraction=0.0)
    all_full = dataclasses.replace(gpt_oss, kv=full_kv)

    def growth(model):
        return kv_bytes_per_token(model, 20_000) - kv_bytes_per_token(model, 10_000)

    assert growth(gpt_oss) == pytest.approx(growth(all_full) / 2)


def test_sliding_layers_stop_growing_at_the_window():
    gpt_oss = model_profile("gpt-oss-120b")
    per_layer_token = 2 * 8 * 64 * 2
    below_window = kv_bytes_per_token(gpt_oss, 100)
    assert below_window == 36 * 100 * per_layer_token
    assert kv_bytes_per_token(gpt_oss, 1000) == (18 * 1000 + 18 * 128) * per_layer_token


# ------------------------------------------------------------------ lookups


@pytest.mark.parametrize(
    "lookup, name, expected",
    [
        (hardware, "DGX-Spark", "gb10"),
        (hardware, "dgx spark", "gb10"),
        (hardware, "H200", "h200"),
        (model_profile, "openai/gpt-oss-120b", "gpt-oss-120b"),
        (model_profile, "OpenAI/GPT-OSS-20B", "gpt-oss-20b"),
        (model_profile, "meta-llama/Llama-3.1-8B-Instruct", "llama-3-8b"),
    ],
)
def test_aliases_resolve_case_insensitively(lookup, name, expected):
    assert lookup(name).name == expected


@pytest.mark.parametrize("lookup, names", [(hardware, hardware_names), (model_profile, model_names)])
def test_unknown_name_raises_one_line_listing_known_names(lookup, names):
    with pytest.raises(ProfileError) as excinfo:
        lookup("no-such-thing")
    message = str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)
    assert "\n" not in message and "no-such-thing" in message
    assert all(name in message for name in names())


@pytest.mark.parametrize(
    "served, expected",
    [
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("gpt-oss-20b", "gpt-oss-20b"),
        ("gpt-oss:120b", "gpt-oss-120b"),
        ("my-org/gpt-oss-20b-mxfp4", "gpt-oss-20b"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3-70b"),
    ],
)
def test_guess_model_profile_from_served_id(served, expected):
    assert guess_model_profile(served).name == expected


@pytest.mark.parametrize(
    "served",
    [
        "Qwen/Qwen3-30B-A3B",
        "ggml-org/gpt-oss-120b-GGUF",
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8",
        "unsloth/Llama-3.3-70B-Instruct-bnb-4bit",
        "bartowski/Meta-Llama-3-8B-Instruct-Q4_K_M",
        "xllama-3-8bx",
    ],
)
def test_guess_returns_none_for_unknown_or_quantized_builds(served):
    assert guess_model_profile(served) is None
