"""Prompts: exact token counts, a unique nonce at the very start, calibration arithmetic."""
from benchy import tokenizer
from benchy.prompts import Calibration, PromptFactory


def test_prompts_have_exact_length_and_start_with_unique_nonce():
    factory = PromptFactory()
    prompts = [factory.build(n) for n in (64, 167, 512, 4096)]
    assert [p.local_tokens for p in prompts] == [64, 167, 512, 4096]
    assert [tokenizer.count(p.text) for p in prompts] == [64, 167, 512, 4096]
    nonces = [p.nonce for p in prompts]
    assert len(set(nonces)) == 4
    assert all(p.text.startswith(f"[benchy {p.nonce}]") for p in prompts)


def test_two_factories_never_share_a_first_token_run():
    a, b = PromptFactory().build(100), PromptFactory().build(100)
    assert a.text[:21] != b.text[:21]  # different salts → different nonces


def test_no_nonce_gives_identical_prompts():
    factory = PromptFactory(nonce=False)
    assert factory.build(300).text == factory.build(300).text


def test_calibration_fits_template_overhead_and_tokenizer_scale():
    # A server whose tokenizer yields 1.25 tokens per o200k token and a 40-token template.
    cal = Calibration.fit((64, 1024), (40 + 80, 40 + 1280))
    assert cal.overhead == 40 and cal.scale == 1.25
    assert cal.local_tokens_for(540) == 400
