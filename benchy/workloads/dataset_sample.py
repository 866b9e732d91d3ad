"""The shipped sample dataset (benchy/data/sample_dataset.json, `--dataset sample`).

ShareGPT-shaped conversations written for benchy (its licence is the project's): a dozen topics,
each a paragraph of plain prose and a few facts, combined with a seeded generator into
conversations of one to four user turns, short questions and long pasted passages, with
reference answers of varied length. Small (a few hundred kB at most) and deterministic: a test
compares the shipped file with `generate()`; `python -m benchy.workloads.dataset_sample` rewrites it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchy.jsontypes import JsonObject

TOPICS = {
    "bread": (
        "Bread rises because yeast eats the sugars in flour and breathes out carbon dioxide. "
        "Kneading lines up the gluten proteins into long elastic strands, and those strands "
        "trap the gas in thousands of small pockets. A slow, cool rise gives the yeast and the "
        "bacteria that live beside it time to make acids and aromas, which is why an overnight "
        "dough tastes deeper than one baked after an hour. Steam in the first minutes of baking "
        "keeps the crust soft long enough for the loaf to spring up before the surface sets.",
        [
            "Use about two percent salt by flour weight.",
            "A wetter dough gives a more open crumb but is harder to shape.",
            "Let the loaf cool for an hour before cutting it, or the inside turns gummy.",
            "A dark bake caramelises the crust and adds flavour.",
        ],
    ),
    "tides": (
        "Tides come from the difference in the moon's pull across the width of the earth. The "
        "ocean on the side facing the moon is pulled a little more than the planet's centre, and "
        "the ocean on the far side a little less, so the water bulges on both sides. As the earth "
        "turns under those two bulges most coasts see two high tides a day. When the sun and the "
        "moon line up, at new and full moon, their pulls add and the range is largest; these are "
        "spring tides. At the quarter moons they partly cancel and the range is smallest.",
        [
            "The tide arrives about fifty minutes later each day.",
            "Bays with the right shape can amplify the range to more than ten metres.",
            "Some places see only one high tide a day because of the basin's resonance.",
            "Tidal friction slowly lengthens the day and pushes the moon away.",
        ],
    ),
    "caching": (
        "A cache keeps the results of recent work close at hand so that repeating the work is "
        "cheap. Its value depends on the hit rate, the share of requests it can answer, and on "
        "how much slower the path behind it is. Every cache must decide what to throw away when "
        "it is full; least recently used is a common rule because recent use predicts the near "
        "future well for many workloads. A cache can also serve stale data, so systems that "
        "cache must say how long an entry stays valid or how it is invalidated when the source "
        "changes.",
        [
            "A small cache with a high hit rate often beats a large slow one.",
            "Measure the hit rate before tuning the size.",
            "Invalidation is usually harder than filling the cache.",
            "Warm the cache before timing anything that depends on it.",
        ],
    ),
    "bicycles": (
        "A bicycle stays upright mostly because the rider steers the front wheel under the "
        "falling frame, but the geometry helps. The front wheel touches the ground behind the "
        "line of the steering axis, a distance called trail, so when the bike leans the wheel "
        "turns into the lean by itself. Gears let the rider keep a comfortable pedalling speed "
        "on hills and on the flat. Tyre pressure trades comfort and grip against rolling "
        "resistance, and wider tyres at lower pressure are often as fast on real roads.",
        [
            "Check the chain for wear every few thousand kilometres.",
            "A saddle that is too low strains the knees.",
            "Brake pads wear faster in the rain.",
            "Lights make you visible long before they help you see.",
        ],
    ),
    "compilers": (
        "A compiler reads source text, turns it into a tree that reflects the grammar, checks "
        "the types and the names, and then lowers the tree step by step into simpler forms until "
        "it can emit machine instructions. Most of the work of a modern optimising compiler "
        "happens on an intermediate representation in which every value is assigned once, which "
        "makes it easy to see where each value comes from. Inlining, constant folding and dead "
        "code removal feed each other: inlining exposes constants, folding makes branches dead, "
        "and removing dead code makes more functions small enough to inline.",
        [
            "Register allocation decides which values live in registers and which spill to memory.",
            "Loop unrolling trades code size for fewer branches.",
            "Undefined behaviour gives the optimiser room to assume things never happen.",
            "Profile data tells the compiler which branches are hot.",
        ],
    ),
    "gardens": (
        "Soil is alive: fungi, bacteria, worms and insects break down dead matter and make its "
        "nutrients available to roots again. Compost feeds that life, and a layer of mulch on "
        "the surface keeps the soil moist and cool in summer. Plants grouped by their need for "
        "water and sun are easier to keep healthy than a mix chosen only by looks. Watering "
        "deeply and less often trains roots to grow down, which helps the garden through dry "
        "weeks, while a little water every day keeps the roots near the surface.",
        [
            "Water early in the morning so the leaves dry before night.",
            "Rotate vegetable beds so that pests of one family do not build up.",
            "Leave some seed heads standing for the birds in winter.",
            "A soil test is cheaper than guessing at fertiliser.",
        ],
    ),
    "queues": (
        "When requests arrive at random and are served one at a time, the waiting time grows "
        "slowly at first and then very fast as the server gets close to fully busy. At half "
        "load a request rarely waits long; at ninety percent load the average wait is many "
        "times the service time, and the tail is far worse. This is why systems that must answer "
        "quickly are run well below their peak throughput, and why measuring throughput alone "
        "says little about the latency users will see. Adding a second server to one queue helps "
        "more than giving each server its own queue.",
        [
            "Little's law ties the number in the system to the arrival rate and the time spent.",
            "Tail latency matters more than the mean for interactive users.",
            "Batching raises throughput at the cost of the first request's wait.",
            "An open loop shows queueing that a closed loop hides.",
        ],
    ),
    "maps": (
        "Every flat map of the round earth distorts something. The Mercator projection keeps "
        "angles true, which made it the sailor's choice because a straight line on it is a "
        "course of constant compass bearing, but it swells areas near the poles enormously. "
        "Equal-area projections keep sizes honest and bend shapes instead. For a city or a "
        "county the distortion is small whatever the projection, which is why local maps can "
        "ignore the problem while world maps cannot.",
        [
            "Greenland looks as large as Africa on a Mercator map but is a fourteenth of its size.",
            "Great circle routes look curved on most flat maps.",
            "Contour lines close together mean steep ground.",
            "A map's scale bar stays right when the map is printed at another size.",
        ],
    ),
    "memory": (
        "Human memory is not a recording. Each time we recall an event we rebuild it from "
        "pieces, and the rebuilding can add details that were never there. Sleep helps fix new "
        "memories, and spreading practice over days works better than cramming the same hours "
        "into one evening. Testing yourself, trying to recall before looking at the answer, is "
        "one of the most effective ways to learn, even when the attempt fails.",
        [
            "Spaced repetition schedules reviews just before you would forget.",
            "Explaining an idea to someone else shows the gaps in it.",
            "Stress before a test narrows attention.",
            "Handwritten notes force a summary, which helps recall.",
        ],
    ),
    "batteries": (
        "A lithium-ion battery stores energy by moving lithium ions between two electrodes "
        "through an electrolyte while electrons travel the outside circuit. Charging pushes the "
        "ions into the graphite anode; discharging lets them flow back to the cathode. Heat and "
        "high charge levels speed up the side reactions that slowly use up lithium, so a battery "
        "kept full and warm ages faster than one kept half charged and cool. Fast charging is "
        "gentle at first and slows down near the top because the anode cannot take ions quickly "
        "when it is nearly full.",
        [
            "Storing a battery at about half charge slows its ageing.",
            "Cold weather lowers the usable capacity until the cell warms up.",
            "Capacity is measured in ampere hours; energy in watt hours.",
            "A swollen cell should be taken out of use at once.",
        ],
    ),
    "letters": (
        "A good letter of complaint is short, specific and calm. It says what happened, when, "
        "and what you would like done, and it includes the order number or account details the "
        "reader needs to act. Anger makes the reader defensive; a clear request with a date "
        "makes it easy to say yes. Keep a copy, and if there is no answer, write again with the "
        "first letter attached.",
        [
            "Put the request in the first paragraph.",
            "Attach photos or receipts rather than describing them.",
            "Name a reasonable deadline.",
            "Thank the reader when the problem is solved.",
        ],
    ),
    "coffee": (
        "Coffee extraction is a race between the pleasant compounds that dissolve early and the "
        "bitter ones that come later. Grind size controls how fast water reaches the inside of "
        "each particle, so a finer grind extracts faster. Too little extraction tastes sour and "
        "thin; too much tastes bitter and dry. Water just off the boil, a scale for the dose, "
        "and fresh beans matter more than an expensive machine.",
        [
            "A ratio of about one gram of coffee to sixteen of water is a common start.",
            "Beans are best a week or two after roasting.",
            "Soft water extracts differently from hard water.",
            "Espresso needs a far finer grind than a filter brew.",
        ],
    ),
}

ASKS = (
    "Can you explain how {t} works in simple terms?",
    "I read this and did not quite follow it. Could you summarise it in three sentences?\n\n{p}",
    "Here is a passage about {t}:\n\n{p}\n\nWhat are the two most important points, and why?",
    "Write a short paragraph for a beginner about {t}.",
    "What is a common mistake people make with {t}?",
    "Give me a numbered list of practical tips about {t}.",
    "Translate the main idea of this text into plain language for a twelve-year-old:\n\n{p}",
    "Is it true that {f_lower} Explain briefly.",
)
FOLLOW_UPS = (
    "Thanks. Can you give an example?",
    "How would that change if I only had ten minutes?",
    "Could you say the same thing in one sentence?",
    "What should I read next to learn more about {t}?",
    "And what about the opposite case?",
    "Make it shorter, please, and keep the most useful part.",
)


def generate(seed: int = 35, conversations: int = 64) -> list[JsonObject]:
    """The sample's conversations, the same for the same seed."""
    rng = np.random.default_rng(seed)
    names = sorted(TOPICS)
    out = []
    for i in range(conversations):
        topic = names[int(rng.integers(len(names)))]
        passage, facts = TOPICS[topic]
        if rng.random() < 0.3:  # a longer pasted passage: two topics' prose
            other = TOPICS[names[int(rng.integers(len(names)))]][0]
            passage = passage + "\n\n" + other
        ask = ASKS[int(rng.integers(len(ASKS)))]
        fact = facts[int(rng.integers(len(facts)))]
        turns = [("human", ask.format(t=topic_words(topic), p=passage, f_lower=fact[0].lower() + fact[1:]))]
        for _ in range(int(rng.choice([0, 0, 1, 2, 3]))):  # follow-up questions: 1 to 4 user turns
            turns.append(("gpt", _answer(rng, passage, facts)))
            turns.append(("human", FOLLOW_UPS[int(rng.integers(len(FOLLOW_UPS)))].format(t=topic_words(topic))))
        turns.append(("gpt", _answer(rng, passage, facts)))
        out.append({"id": f"benchy-sample-{i:03d}", "conversations": [{"from": r, "value": v} for r, v in turns]})
    return out


def topic_words(topic: str) -> str:
    return {"caching": "a cache", "queues": "queueing", "letters": "a letter of complaint"}.get(topic, topic)


def _answer(rng: np.random.Generator, passage: str, facts: list[str]) -> str:
    """An answer of one to several paragraphs: sentences of the passage and the facts."""
    sentences = [s.strip() + "." for s in passage.replace("\n\n", " ").split(". ") if s.strip()]
    picks = [sentences[int(i)] for i in rng.integers(len(sentences), size=int(rng.integers(1, 7)))]
    tips = [facts[int(i)] for i in rng.permutation(len(facts))[: int(rng.integers(0, len(facts) + 1))]]
    text = " ".join(s.rstrip(".") + "." for s in picks)
    if tips:
        text += "\n\n" + "\n".join(f"{n}. {tip}" for n, tip in enumerate(tips, 1))
    return text


def text(rows: list[JsonObject]) -> str:
    return json.dumps(rows, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "data" / "sample_dataset.json"
    target.write_text(text(generate()), encoding="utf-8")
    print(target)
