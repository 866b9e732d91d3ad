"""Prompt building for 10,000 requests: the time benchy's PromptFactory takes to make the
prompts of a run, with benchy's own word list and with words fitted to a tokenizer that splits
most of them (load/lengths.py), at the lengths a llama-bench sweep uses; and the same sweep as
fitted dataset prompts (--dataset sample --pp …), their bodies cut by that tokenizer before the
case (load/dataset_fit.py: the cut included in the time).

A developer benchmark, not a test (issue 35's budget: under 5 s for 10,000 requests). The
fitted run also counts every prompt it built with that tokenizer and says how many were not
their target (0 expected), so the figure is of prompts that are exact.

    python benchmarks/bench_prompts.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from benchy.load import dataset_fit, lengths
from benchy.load.dataset_load import DatasetPrompts
from benchy.load.prompts import Calibration, PromptFactory
from benchy.workloads import dataset
from benchy.workloads.case import Case

LENGTHS = (64, 128, 256, 512, 2048)  # cycled over the requests: 1,000 tokens a prompt on average


def syllable_tokenizer(folder: Path) -> lengths.FileTokenizer:
    """A tokenizer.json that cuts a word into pieces of up to three letters (as `benchy sim
    --vocab syllable`): most of benchy's filler words are several tokens there."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    pieces = r" ?[A-Za-z]{1,3}| ?[0-9]| ?[^\sA-Za-z0-9]|\s+"
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pieces), behavior="isolated")
    tok.save(str(folder / "tokenizer.json"))
    return lengths.FileTokenizer(folder)


def build(factory: PromptFactory, n: int) -> tuple[str, list[str]]:
    """The prompts, and the time they took: wall and this process's CPU (on a shared machine
    the CPU seconds are the steadier figure)."""
    wall, cpu = time.perf_counter(), time.process_time()
    texts = [factory.build(LENGTHS[i % len(LENGTHS)]).text for i in range(n)]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return f"{n} prompts in {wall:.2f} s ({cpu:.2f} CPU-s, {cpu / n * 1e6:.0f} CPU-µs a prompt)", texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    n = parser.parse_args().requests
    took, _ = build(PromptFactory(salt="bench"), n)
    print(f"benchy's words:  {took}")
    with tempfile.TemporaryDirectory() as folder:
        counter = syllable_tokenizer(Path(folder))
        start = time.perf_counter()
        fit = asyncio.run(lengths.fit_words(counter))
        fit_s = time.perf_counter() - start
        took, texts = build(PromptFactory(Calibration(lengths=fit), salt="bench"), n)
        counts = counter.count_now(texts)
        missed = sum(c != LENGTHS[i % len(LENGTHS)] for i, c in enumerate(counts))
        print(
            f"fitted words:    {took}; "
            f"fit {fit_s * 1000:.0f} ms ({fit.words or 0} words one token); {missed} of {n} not at their target"
        )
        base = PromptFactory(Calibration(lengths=fit), salt="bench")
        wall, cpu = time.perf_counter(), time.process_time()
        bodies = asyncio.run(dataset_bodies(counter, base))
        spec = dataset.DatasetSpec("sample", mode="fitted", bodies=bodies, lengths=counter.method)
        cut_wall, cut_cpu = time.perf_counter() - wall, time.process_time() - cpu
        took, texts = build(DatasetPrompts(base, spec, seed=0), n)
        counts = counter.count_now(texts)
    missed = sum(c != LENGTHS[i % len(LENGTHS)] for i, c in enumerate(counts))
    print(
        f"dataset, fitted: {took}, after {len(bodies)} bodies cut in {cut_wall:.2f} s ({cut_cpu:.2f} CPU-s); "
        f"{missed} of {n} not at their target"
    )


async def dataset_bodies(counter: lengths.FileTokenizer, base: PromptFactory) -> dict:
    """The shipped sample's bodies at each length, as a run cuts them before its cases."""
    texts = [e.prompt for e in dataset.load("sample").entries]
    tokens = [dataset_fit.body_tokens(Case(pp=pp, tg=1), base.calibration, nonce=True) for pp in LENGTHS]
    return await dataset_fit.fit_bodies(counter, texts, dataset_fit.start_pool(len(texts), 0), tokens)


if __name__ == "__main__":
    main()
