"""Token salad, as broken servers emit it, for the `garbled` verdict's tests.

Each generator takes a seed and a length in tokens and returns text a server with
cross-request KV reads (or a broken detokeniser) hands back with a clean finish:

- multilingual: sub-word fragments of a large multilingual vocabulary, decoded one
  after the other (each piece keeps its own leading space or none, as byte-level BPE
  pieces do);
- glued: ASCII sub-word pieces of real words glued without spaces, as a detokeniser that
  drops the word-start markers leaves them;
- spaced_letters: every character of a reply spaced apart;
- special_burst: bursts of special tokens (`<｜begin▁of▁sentence｜>` from NaN logits)
  among fragments;
- bpe_markers: the raw byte-level BPE or SentencePiece pieces (`Ġ`, `Ċ`, `▁`) of a
  reply, never mapped back to spaces and newlines;
- mojibake: UTF-8 bytes read as Latin-1, and U+FFFD replacement characters;
- noise: random printable characters;
- shuffled: a handful of words in random order;
- tool_args: JSON with every required key whose values are salad;
- mid_reasoning: a healthy reasoning with a salad burst in the middle.

`samples()` returns (kind, text) pairs over seeds and lengths; the lengths start at
40 tokens, or at the kind's MIN_TOKENS. A token here is one vocabulary piece (a few
characters).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable

#: Pieces of a byte-level BPE vocabulary: English words and continuations, code.
ENGLISH = [
    " the", " of", " and", " to", " in", " for", " is", " on", " that", " with", " as",
    " by", " it", " at", " from", " this", " be", " are", " or", " an", " not", " we",
    "ing", "ed", "er", "ly", "tion", "ation", "al", "ic", "ment", "ness", "able", "ity",
    "ous", "ive", "ize", "ful", "less", "ance", "ence", "ism", "ist", "ure", "ould",
    "ight", "ough", "ench", "ock", "ump", "ast", "ilities", "ational", "ements", "ingly",
    " un", " re", " pre", " dis", " inter", " comp", " con", " pro", " trans", " sub",
    " over", " under", " counter", " micro", " multi", " self", " respond", " Comp",
    " account", " upgrade", " business", " plan", " cancel", " user", " server", " batch",
    " cache", " token", " model", " request", " reply", " decode",
]
CODE = ["();", ".get", "_id", "ERR", "::", "=\"", " {", "}", "->", "self", "__", "Exception",
        "Manager", " return", " const", "[]", "\n", "  ", "0", "12", "_t", ".h", "ptr"]
CHINESE = ["的", "是", "在", "我们", "作为", "不得不", "价格", "上涨", "模型", "进行", "可以",
           "这个", "一个", "因为", "所以", "服务", "请求", "缓存", "时间", "问题", "用户", "没有"]
CYRILLIC = ["ания", "ться", " при", "ост", "ение", " в", " на", "ого", "ский", " что",
            "ные", "ров", " пол", "ель", "ств", " не", "ка", "ий", "ение", " про"]
KOREAN = ["기", "에서", "하는", "습니다", " 있", "으로", "의", "를", "지", " 수", "했다", "는"]
JAPANESE = ["の", "は", "を", "ます", "する", "ている", "ション", "キャ", "データ", "から"]
ARABIC = ["ال", "ين", " في", "ات", "ية", " من", "ون", " على", "ها"]
THAI = ["การ", "ที่", "ของ", "และ", "ใน", "เป็น", "ได้"]
GREEK = ["ου", "και", "την", " των", "ται", "ση"]
HEBREW = ["של", "את", "ים", " על", "ות"]
DEVANAGARI = ["के", "है", "में", "की", " और", "से"]

FOREIGN = [CYRILLIC, KOREAN, JAPANESE, ARABIC, THAI, GREEK, HEBREW, DEVANAGARI]
BOS = "<｜begin▁of▁sentence｜>"
SPECIALS = [BOS, "<｜end▁of▁sentence｜>", "<|EOT|>", "<｜Assistant｜>", "<|im_end|>"]

HEALTHY = ("The user wants account {acc} moved to the business plan and then cancelled. "
           "I should do the upgrade first with change_plan, then ask about the timing of "
           "the cancellation, because cancel_subscription needs the effective date. ")

SENTENCES = [
    "The user wants the account upgraded to the business plan",
    "I should call change_plan with the account id and the new plan",
    "Cancellation needs an effective date so I will ask for it",
    "The invoice will show the prorated charge for the rest of the term",
    "Nothing in the record blocks the upgrade and the account is active",
]


def _rng(kind: str, seed: int) -> random.Random:
    return random.Random(f"salad/{kind}/{seed}")


def multilingual(seed: int, tokens: int) -> str:
    """Fragments of a multilingual vocabulary: a third to a half of them neither
    Latin nor Han, as DeepSeek's vocabulary gives when the model reads another
    request's KV."""
    rng = _rng("multilingual", seed)
    foreign_share = rng.uniform(0.3, 0.5)
    pools = rng.sample(FOREIGN, rng.randint(3, len(FOREIGN)))
    out = []
    for _ in range(tokens):
        draw = rng.random()
        if draw < foreign_share:
            out.append(rng.choice(rng.choice(pools)))
        elif draw < foreign_share + (1 - foreign_share) / 2:
            out.append(rng.choice(CHINESE))
        else:
            out.append(rng.choice(ENGLISH + CODE))
    return "".join(out)


def glued(seed: int, tokens: int) -> str:
    """Sub-word pieces glued: a reply whose word-start markers were dropped (the
    spaces and newlines are gone, sentences run together)."""
    rng = _rng("glued", seed)
    out: list[str] = []
    count = 0
    while count < tokens:
        sentence = rng.choice(SENTENCES).replace(" ", "")
        if rng.random() < 0.5:
            sentence = sentence.lower()
        words = rng.randint(4, 9)
        pieces = [p.strip() for p in rng.sample(ENGLISH, words)]
        out.append(sentence + "".join(pieces) + rng.choice([".", ",", ";", ""]) + " ")
        count += len(sentence) // 4 + words
    return "".join(out)


def spaced_letters(seed: int, tokens: int) -> str:
    """A reply decoded character by character, each one spaced apart."""
    rng = _rng("spaced_letters", seed)
    words = " ".join(rng.choice(SENTENCES) for _ in range(max(1, tokens // 12)))
    letters = [c for c in words if c != " "]
    return " ".join(letters[:max(tokens, 40)])


def special_burst(seed: int, tokens: int) -> str:
    """A burst of BOS (NaN logits) or other special tokens among salad fragments."""
    rng = _rng("special_burst", seed)
    out = []
    for _ in range(tokens):
        draw = rng.random()
        if draw < 0.3:
            out.append(BOS if rng.random() < 0.7 else rng.choice(SPECIALS))
        elif draw < 0.6:
            out.append(rng.choice(CHINESE))
        else:
            out.append(rng.choice(ENGLISH))
    return "".join(out)


def bpe_markers(seed: int, tokens: int) -> str:
    """Raw vocabulary pieces: `Ġ` for a space and `Ċ` for a newline (byte-level BPE), or
    `▁` (SentencePiece), left in the text."""
    rng = _rng("bpe_markers", seed)
    space, newline = ("Ġ", "Ċ") if rng.random() < 0.5 else ("▁", "<0x0A>")
    words: list[str] = []
    while len(words) < tokens:
        words += [*rng.choice(SENTENCES).split(), "\n"]
    text = ""
    for word in words[:tokens]:
        text += newline if word == "\n" else space + word
    return text


def mojibake(seed: int, tokens: int) -> str:
    """UTF-8 read as Latin-1 (`Ã©`, `â€™`) and replacement characters where the
    detokeniser met an incomplete byte sequence."""
    rng = _rng("mojibake", seed)
    source = "Le modèle a été mis à jour — l’utilisateur veut “business” 用户的请求 éàüö "
    out = []
    for _ in range(tokens):
        piece = rng.choice(source.split(" "))
        if rng.random() < 0.6:
            piece = piece.encode("utf-8").decode("latin-1")
        if rng.random() < 0.3:
            piece += "\ufffd" * rng.randint(1, 3)
        out.append(piece)
    return " ".join(out)


def noise(seed: int, tokens: int) -> str:
    """Random printable characters: nothing a model writes, no known format."""
    rng = _rng("noise", seed)
    alphabet = string.ascii_letters + string.digits + string.punctuation + " "
    return "".join(rng.choice(alphabet) for _ in range(tokens * 4))


def shuffled(seed: int, tokens: int) -> str:
    """A handful of words (5 to 10) in random order."""
    rng = _rng("shuffled", seed)
    vocab = rng.sample("account upgrade business plan cancel user the to and invoice "
                       "term seat".split(), rng.randint(5, 10))
    return " ".join(rng.choice(vocab) for _ in range(tokens))


_TEXT_KINDS: dict[str, Callable[[int, int], str]] = {
    "multilingual": multilingual, "glued": glued, "spaced_letters": spaced_letters,
    "special_burst": special_burst, "bpe_markers": bpe_markers, "mojibake": mojibake,
    "noise": noise, "shuffled": shuffled,
}


#: The smallest salad of a kind the `garbled` rule promises to catch, in tokens (the rest
#: from 40): printable noise needs a window of 192 characters, glued text three runs of
#: 32 letters (three sentences glued).
MIN_TOKENS = {"noise": 48, "glued": 64}


def _part(kind: str, seed: int, tokens: int) -> str:
    return _TEXT_KINDS[kind](seed, max(tokens, MIN_TOKENS.get(kind, 0)))


def tool_args(seed: int, tokens: int) -> str:
    """change_plan's arguments: every required key, parseable JSON, salad values."""
    rng = _rng("tool_args", seed)
    kind = rng.choice(["multilingual", "special_burst", "bpe_markers", "noise", "mojibake"])
    salad = _part(kind, seed, tokens)
    args = {"account_id": rng.choice(["XEHM4B", salad[:12]]), "plan": "business",
            "reason": salad}
    if rng.random() < 0.5:
        args = {"account_id": "XEHM4B", "plan": salad, "notes": [{"text": salad}]}
    return json.dumps(args, ensure_ascii=rng.random() < 0.3)


def mid_reasoning(seed: int, tokens: int) -> str:
    """Healthy reasoning, a salad burst, then healthy reasoning again."""
    rng = _rng("mid_reasoning", seed)
    kind = rng.choice(["multilingual", "special_burst", "bpe_markers", "glued", "noise"])
    before = HEALTHY.format(acc="XEHM4B") * rng.randint(1, 6)
    after = HEALTHY.format(acc="XEHM4B") * rng.randint(1, 6)
    return before + _part(kind, seed, tokens) + " " + after


KINDS: dict[str, Callable[[int, int], str]] = {
    **_TEXT_KINDS, "tool_args": tool_args, "mid_reasoning": mid_reasoning}

LENGTHS = (40, 64, 150, 400, 1200, 3000)


def samples(seeds: range = range(4), lengths: tuple[int, ...] = LENGTHS
            ) -> list[tuple[str, str]]:
    """(kind, text) for every kind, seed and length at least the kind's smallest."""
    return [(kind, make(seed, length)) for kind, make in KINDS.items()
            for seed in seeds for length in lengths if length >= MIN_TOKENS.get(kind, 0)]
