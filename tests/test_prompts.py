"""Prompts: exact token counts, a unique nonce at the very start, calibration arithmetic."""

from benchy.load.prompts import SHORT_BLOCK, Calibration, PromptFactory, block_text
from benchy.measure import tokenizer


def test_prompts_have_exact_length_and_start_with_unique_nonce():
    factory = PromptFactory()
    prompts = [factory.build(n) for n in (64, 167, 512, 4096)]
    assert [p.local_tokens for p in prompts] == [64, 167, 512, 4096]
    assert [tokenizer.count(p.text) for p in prompts] == [64, 167, 512, 4096]
    nonces = [p.nonce for p in prompts]
    assert len(set(nonces)) == 4
    assert all(p.text.startswith(p.nonce) for p in prompts)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_nonces_share_almost_no_leading_tokens():
    # A shared run of tokens at the front could fill a 16-token prefix-cache block.
    # Fixed salts keep the test deterministic; the property holds for any salt.
    factories = [PromptFactory(salt="a"), PromptFactory(salt="b")]
    prompts = [f.build(100) for f in factories for _ in range(50)]
    ids = [tokenizer.encode(p.text)[:16] for p in prompts]
    longest = max(common_prefix(x, y) for i, x in enumerate(ids) for y in ids[i + 1 :])
    assert longest <= 4


def test_no_nonce_gives_identical_prompts():
    factory = PromptFactory(nonce=False)
    assert factory.build(300).text == factory.build(300).text


def test_calibration_fits_template_overhead_and_tokenizer_scale():
    # A server whose tokenizer yields 1.25 tokens per o200k token and a 40-token template.
    cal = Calibration.fit((64, 1024), (40 + 80, 40 + 1280))
    assert cal.overhead_tokens == 40 and cal.scale == 1.25
    assert cal.local_tokens_for(540) == 400


def test_consecutive_nonces_differ_at_their_first_token():
    # llama.cpp caches token by token: a shared first word would be one cached token.
    factory = PromptFactory(salt="x")
    firsts = [tokenizer.encode(factory.build(50).text)[0] for _ in range(32)]
    assert len(set(firsts)) == 32


def test_prompt_length_is_exact_for_any_nonce():
    factory = PromptFactory()
    assert {factory.build(300).local_tokens for _ in range(200)} == {300}


def test_filler_words_are_counted_as_the_encoder_counts_them():
    # tokenizer.count takes a text of filler words as one token a word without encoding it
    # (workers never load the vocabulary); the encoder must agree on every prompt kind built
    # of them, and on anything else count must be the encoder's.
    for word in tokenizer.filler_words():
        assert len(tokenizer.encode(" " + word)) == 1, word
    factory = PromptFactory(Calibration(overhead_tokens=7.0, scale=1.1), salt="words")
    texts = [factory.build(n).text for n in (24, 64, 333, 2048)]
    texts += [factory.build(64, depth=512).text, factory.message(100).text, factory.next_nonce()]
    texts += [PromptFactory(nonce=False).build(200).text, tokenizer.filler(77, seed=3)]
    texts += [p.text for p in factory.calibration_prompts()]
    for text in texts:
        assert tokenizer._filler_word_count(text) is not None
        assert tokenizer.count(text) == len(tokenizer.encode(text))
    for other in (
        "",
        " ",
        "the of",
        " the  of",
        " the of ",
        " the\nof",
        " The of",
        " the of.",
        " vonlan bonsun",
        "warm",
    ):
        assert tokenizer._filler_word_count(other) is None
        assert tokenizer.count(other) == len(tokenizer.encode(other))


def test_filler_text_is_the_decoded_filler_tokens():
    # filler() joins the words; it must be exactly the text their tokens decode to.
    text = tokenizer.filler(300, seed=5)
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.count(text) == len(tokenizer.encode(text)) == 300


def test_a_short_block_is_the_prefix_of_a_long_one_across_the_two_ways_of_drawing_it():
    """Below SHORT_BLOCK words a block is drawn by a Python loop, above it by numpy: the same
    draws either way, so a shorter block stays a prefix of a longer one (what the shared
    prefixes of a cache-aware case rely on), for the filler words and for a fitted list."""
    for words in (None, ("alpha", "beta", "gamma")):
        long = block_text("salt/body/7", 4 * SHORT_BLOCK, words)
        for n in (1, SHORT_BLOCK - 1, SHORT_BLOCK, SHORT_BLOCK + 1):
            short = block_text("salt/body/7", n, words)
            assert long.startswith(short) and short.count(" ") == n
