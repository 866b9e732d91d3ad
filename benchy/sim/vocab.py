"""The simulator's own tokenizer: word-level, and on purpose not benchy's o200k.

No real server's tokenizer is benchy's local one, so a simulator that counted like benchy
could never show what a foreign vocabulary does to benchy's figures: its local count would
always agree with usage. Here a token is a special marker (`<|channel|>`, `<think>` …), a
word of ASCII letters with at most one leading space, one digit or one other character (with
at most one leading space), or a run of whitespace.

Prompts made of benchy's filler (common English words, each one o200k token with its leading
space) count the same in both, as they do on most real servers; the template's punctuation
and numbers do not. The words the simulator *generates* are made-up words of two
syllables: one token here, two in o200k, as a random-weight model's or another
language's output is on a real server. The truth log counts in these tokens, so tests judge
benchy's counts against what this server says, not against benchy's own tokenizer.

`--vocab syllable` is a vocabulary further from o200k: a word is cut into pieces of at most
three letters (the first with its leading space), so " the" is one token but " between" three
(" bet", "wee", "n"); most of benchy's filler words are then several tokens, as on a small BPE
or a vocabulary made for another language. Its generated words are three-letter ones, one
token each. `--vocab bytes` is the word vocabulary of a byte-level BPE that merged nothing
outside ASCII: a CJK character counts 3 tokens, an emoji 4 (issue 52). The vocabulary is the
process's (each simulator is one), chosen by `use`.
"""

from __future__ import annotations

import random
import re
import zlib

NAME = "benchy-sim word-level"

SPECIAL = (
    "<|endoftext|>",
    "<|return|>",
    "<|constrain|>",
    "<|channel|>",
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|call|>",
    "<think>",
    "</think>",
)
_SPECIAL_IDS = {text: i for i, text in enumerate(SPECIAL)}
_SPECIALS = "|".join(re.escape(s) for s in SPECIAL)
_PATTERNS = {
    "word": re.compile(_SPECIALS + r"| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]|\s+"),
    "syllable": re.compile(_SPECIALS + r"| ?[A-Za-z]{1,3}| ?[0-9]| ?[^\sA-Za-z0-9]|\s+"),
    # "bytes": the word pieces, but a piece outside ASCII is a token per UTF-8 byte (below)
    "bytes": re.compile(_SPECIALS + r"| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]|\s+"),
}
VOCABS = tuple(_PATTERNS)
_PIECE = _PATTERNS["word"]
_active = "word"


def use(name: str) -> None:
    """Makes `name` (one of VOCABS) this process's vocabulary: prompts, /tokenize and output."""
    global _PIECE, _active
    _PIECE, _active = _PATTERNS[name], name


def pieces(text: str) -> list[str]:
    """The tokens of `text`, as text: they join back to it exactly."""
    return _PIECE.findall(text)


def encode(text: str) -> list[int]:
    """Token ids: special markers first, every other piece by a stable hash (ids only need to
    be equal for equal pieces, across processes, for the prefix cache); under "bytes" a piece
    outside ASCII is one id per UTF-8 byte."""
    if _active == "bytes":
        return [i for p in pieces(text) for i in _byte_ids(p)]
    return [_SPECIAL_IDS[p] if p in _SPECIAL_IDS else _id(p) for p in pieces(text)]


def _byte_ids(piece: str) -> list[int]:
    """A piece's ids under "bytes": a byte-level vocabulary that merged ASCII words but nothing
    of other scripts (a small BPE trained on English): a CJK character is 3 tokens, an emoji 4,
    "é" 2, so one more character can add several tokens (issue 52)."""
    if piece.isascii() or piece in _SPECIAL_IDS:
        return [_SPECIAL_IDS[piece] if piece in _SPECIAL_IDS else _id(piece)]
    return [BYTE_BASE + b for b in piece.encode()]


BYTE_BASE = 2_000_000_000 + len(SPECIAL)  # byte ids, above every hashed piece's


def _id(piece: str) -> int:
    return len(SPECIAL) + zlib.crc32(piece.encode()) % 2_000_000_000


def count(text: str) -> int:
    if _active == "bytes":
        return sum(1 if p.isascii() or p in _SPECIAL_IDS else len(p.encode()) for p in pieces(text))
    return len(pieces(text))


_OUTPUT_WORDS = """
balkas balrun banfun banis barvos basnan batdan bedas belmel berbus betbus betgun betvu bilfar
bilrun bisbul bitdat bitdon bonpis bonsun borsa borton bosal boskot botlun bovin bulcet burgul
butvor caben cacul cebe celbet cenos circu cirkat cirris coskas cudur cuttun dagon danmar darru
datcul defit delcul deldit deltal derpen deslun dilsi dilvon dircit disca dogur donfal dospal
fafe fagol fandil farco fatban fedol fedu felrer fertos fildu finpal fisbel folgu forfa fotdar
furfol fuslot fuslus fuspa futgot galla ganba gangal garman gatke gelgul genfat genrel ginmet
gitbet gitfot gocas gokel golpo gope gosgul gunal gutkor kalpar kannen kannin katgon katpar
katsal kaver kekil kellos kelvo kesbot kilmin kipor kufis kulpal kunvu kuscar kutgar kutpil
lanlal lanlut larce lasros latben latlon latpus lelkun lerco letbor lettas libur likot lilgil
lircos lirnir lotkut lotnut lotten lukan lunril lutnir malcol manvat merbo mersut mesbat metran
meves milful milpal milpan mistu mittit modet molket monmir morrus motrat murcul muspir nalle
nartu navot nelmin nengan nennes nercon nerit nesle nessit netmal nilre nittut nolrus norlos
notkut nulvo nulvon nutle pacos paslar patkon pensol pesla pigen pilcis pirin pisvus pitlor pobe
polror porvet pucos pulir pusdus ranmu rarcat ratvar relrir renkos ressir retvet ronfen rono
rosvel rutdul salden sancin sassin satrir selli sellol selnus sernat sesgas setgot silfun silgar
silgur sirgur soldon sosbal sotlol sovel sulsus sunkon sunvas surkat talcut tande tansa tasgas
telgot terlir terlus termi tetli tilfo tirne tistes tolral topas torbas tormen torpa totmas
tulban tulpun turmit tusvon tutmus vagun varbos vargon vinvon vispul vissut volgos vonlan vonlo
vulpir
"""


def output_words() -> tuple[str, ...]:
    """256 made-up words of two syllables, each one token here and exactly two in o200k (chosen
    so, offline: tests/test_sim.py checks it), so that benchy's local count, once calibrated,
    estimates this server's count without a per-text wobble that tests would have to allow."""
    return _WORDS


_WORDS = tuple(_OUTPUT_WORDS.split())
_SHORT_WORDS = tuple(sorted({w[:3] for w in _WORDS}))  # one token each under "syllable"


def words(n: int, seed: int) -> list[str]:
    """n generated tokens, each a made-up word with its leading space, deterministic per seed."""
    vocab = _SHORT_WORDS if _active == "syllable" else output_words()
    rng = random.Random(seed)
    return [" " + vocab[rng.randrange(len(vocab))] for _ in range(n)]
