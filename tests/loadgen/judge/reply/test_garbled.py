"""`garbled`: token salad with a clean finish (loadgen.judge.reply.garbled).

Each detector's thresholds are pinned with a value just under and just over; every
honest family (tests/support/legit_families.py) passes, every salad sample
(tests/support/salad.py) at or above the smallest size its rule promises is caught.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import string
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from loadgen.engine.requests import RequestMaker
from loadgen.judge.reply.garbled import EXCERPT_CHARS, GarbleFinding, find_garble, garble_in_text
from loadgen.judge.text.scripts import request_scripts, text_scripts
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import Scenario, VerdictConfig
from loadgen.workload import WorkItem
from tests.loadgen.conftest import run_cli
from tests.support import salad
from tests.support.legit_corpus import replay_line
from tests.support.legit_families import FAMILIES, family_replies
from tests.support.scenario_files import write_scenario

BOS = "<｜begin▁of▁sentence｜>"
EPS = 1e-9  # below a measured statistic by less than any rounding could matter
PROSE = ("The user wants account XEHM4B moved to the business plan, then cancelled at the end "
         "of the term. I will upgrade it first with change_plan and ask about the timing. ")


def rec(**kw: Any) -> RequestRecord:
    base: dict[str, Any] = {"run_id": "r", "scenario": "s", "phase": "measurement", "seq": 0,
                            "endpoint": "http://x", "item_id": "i", "finish_reason": "stop"}
    base.update(kw)
    return RequestRecord(**base)


def judge(text: str, scripts: tuple[str, ...] = (), **cfg: Any) -> tuple[str, str, str] | None:
    return garble_in_text(text, frozenset(scripts), VerdictConfig(**cfg))


def kind_of(text: str, scripts: tuple[str, ...] = (), **cfg: Any) -> str | None:
    found = judge(text, scripts, **cfg)
    return found[0] if found else None


# ------------------------------------------------------------------------ markers


def bos_at(offsets: list[int]) -> str:
    """BOS tokens starting at these offsets, dots between."""
    text = ""
    for offset in offsets:
        text += "." * (offset - len(text)) + BOS
    return text


def test_a_burst_of_four_bos_tokens_is_garbled_and_three_are_not() -> None:
    assert kind_of(PROSE + BOS * 4 + PROSE) == "markers"
    assert kind_of(PROSE + BOS * 3 + PROSE) is None
    assert kind_of(PROSE + BOS * 3 + PROSE, garbled_marker_burst=3) == "markers"
    assert kind_of(PROSE + BOS * 4 + PROSE, garbled_marker_burst=5) is None


def test_the_burst_lies_within_the_window() -> None:
    # The first and the fourth marker start 159 characters apart: one burst; 160: none.
    assert kind_of(bos_at([0, 50, 100, 159])) == "markers"
    assert kind_of(bos_at([0, 50, 100, 160])) is None
    assert kind_of(bos_at([0, 50, 100, 160]), garbled_marker_window_chars=161) == "markers"


def test_special_tokens_named_in_prose_are_not_a_burst() -> None:
    # One token in a sentence is token_leak's; a chat template spelled out names four
    # different tokens once each.
    assert kind_of(f"The model starts every prompt with {BOS} and ends with EOS.") is None
    template = ("<｜begin▁of▁sentence｜>{system}<｜User｜>{q}<｜Assistant｜></think>"
                "<｜end▁of▁sentence｜>")
    assert kind_of(f"The template is `{template}`.") is None


def test_tokenizer_markers_glued_into_words_are_a_burst_and_quoted_ones_are_not() -> None:
    assert kind_of("▁The▁user▁wants▁to▁upgrade") == "markers"
    assert kind_of("ĠTheĠuserĠwantsĊĊ") == "markers"
    assert kind_of("GPT-2 marks a space with Ġ: ['ĠThe', 'Ġuser', 'Ġwants', 'Ġto'].") is None
    assert kind_of("SentencePiece writes '▁The', '▁user', '▁wants' and '▁to'.") is None


@pytest.mark.parametrize("marker", ["\ufffd", "Ã©", "\x01", "<0x0A>"])
def test_replacement_characters_mojibake_and_control_characters(marker: str) -> None:
    assert kind_of(f"{PROSE}ab{marker}cd{marker}ef{marker}gh{marker}{PROSE}") == "markers"
    assert kind_of(f"{PROSE}ab{marker}cd{marker}ef{marker}gh{PROSE}") is None


@pytest.mark.parametrize("text", [
    "\x1b[31mERROR\x1b[0m \x1b[32mOK\x1b[0m \x1b[33mWARN\x1b[0m \x1b[1mX\x1b[0m",  # ANSI
    "Le modèle a été mis à jour à Noël ; l’été dernier déjà, à côté.",
    "On dit «café», «thé», «été», «déjà» et «allô».",  # an accent before a guillemet
    "Mi ŝatas riĉan manĝaĵon kaj aĉeti ĉiun riĉan aĉaĵon.",  # Esperanto's ĉ
    "let r = x |> f <| y |> g <| z |> h <| w |> k",  # F#'s pipes
])
def test_ansi_colours_accents_and_pipes_are_not_markers(text: str) -> None:
    assert kind_of(text) is None


def test_mojibake_of_chinese_and_emoji_is() -> None:
    assert kind_of("用户的请求".encode().decode("latin-1")) == "markers"
    assert kind_of("用户的请求".encode().decode("cp1252", "replace")) == "markers"
    assert kind_of(" ".join(["😀🚀"] * 2).encode().decode("latin-1")) == "markers"


# ------------------------------------------------------------------------ scripts


def switches_at(offsets: list[int]) -> str:
    """A Cyrillic letter glued to a Han character (one switch) at each offset (the Han
    character's), dots between."""
    text = ""
    for offset in offsets:
        text += "." * (offset - 1 - len(text)) + "а的"
    return text


def test_four_glued_switches_are_salad_and_three_are_not() -> None:
    assert kind_of("ан的ан的ан") == "scripts"  # н|的, 的|а, н|的, 的|а
    assert kind_of("ан的ан的") is None
    assert kind_of("ан的ан的", garbled_script_switches=3) == "scripts"
    assert kind_of("ан的ан的ан", garbled_script_switches=5) is None


def test_the_switches_lie_within_the_window() -> None:
    assert kind_of(switches_at([1, 40, 80, 120])) == "scripts"  # 119 apart
    assert kind_of(switches_at([1, 40, 80, 121])) is None  # 120 apart
    assert kind_of(switches_at([1, 40, 80, 121]), garbled_script_window_chars=121) == "scripts"


def test_the_requests_scripts_explain_themselves() -> None:
    text = "ан的ан的ан的ан"
    assert kind_of(text) == "scripts"
    assert kind_of(text, scripts=("Cyrillic",)) is None


def test_two_non_latin_scripts_a_space_apart_switch_and_latin_ones_do_not() -> None:
    assert kind_of("привет 你好 привет 你好 привет") == "scripts"
    russian = "Мы используем vLLM для inference на GPU с KV cache и CUDA graphs. " * 4
    assert kind_of(russian) is None  # a Russian reply full of English terms


@pytest.mark.parametrize("text", [
    "vLLMのPagedAttentionは、KVキャッシュを固定サイズのブロックに分割します。" * 5,
    "vLLM은 KV 캐시를 GPU에서 관리합니다. 大韓民國의 서울(首都)에 있습니다. " * 5,
    "使用vLLM的KV cache和CUDA Graph，decode阶段更快。" * 5,
    "Δt = 10μs, R = 4kΩ, σ² = 0.5, λ值为3，θ = π/4. " * 5,
    "เราใช้vLLMกับGPUในการทดสอบKV cacheทุกวัน " * 5,  # Thai: no spaces between words
])
def test_chinese_japanese_korean_and_greek_units_are_language(text: str) -> None:
    assert kind_of(text) is None


def test_hello_in_many_scripts_is_not_salad() -> None:
    words = "привет, مرحبا, नमस्ते, こんにちは, 안녕하세요, γεια σου, שלום, สวัสดี, բարեւ"
    assert kind_of(f"Hello in other languages: {words}.") is None
    assert kind_of("\n".join(f"- {w}" for w in words.split(", "))) is None


def test_the_finding_names_the_scripts_seen_and_the_requests() -> None:
    kind, detail, excerpt = judge("ан的ан的ан기ого")
    assert kind == "scripts"
    assert "Cyrillic" in detail and "Hangul" in detail and "Han" in detail
    assert "threshold 4" in detail and "within 120 chars" in detail
    assert "the request's scripts: none beyond Latin" in detail
    assert "ан的" in excerpt
    assert "request's scripts: Arabic" in judge("ан的ан的ан", scripts=("Arabic",))[1]


# ---------------------------------------------------------------------- fragments

GLUED = ("theuserwantstheaccountupgradedtothebusinessplanandthencancelledattheend"
         "ofthetermbecausetheyneedaninvoiceatthebusinessrateforrecords")


def glued_runs(lengths: list[int], between: str = ". ") -> str:
    return between.join(GLUED[i * 7:i * 7 + n] for i, n in enumerate(lengths))


def glued_around_words(letters: int) -> str:
    """Three glued runs of 32 (96 glued letters, the first from the reply's first
    character) with `letters` ordinary letters in two-letter words between them."""
    filler = " ".join(["go"] * (letters // 2)) + (" a" if letters % 2 else "")
    return GLUED[:32] + " " + filler + " " + GLUED[7:39] + ". " + GLUED[14:46]


def test_three_glued_runs_of_32_letters_are_salad() -> None:
    assert kind_of(glued_runs([32, 32, 32])) == "glued_fragments"
    assert kind_of(glued_runs([31, 32, 33])) is None  # two runs long enough
    assert kind_of(glued_runs([31, 32, 33]), garbled_glued_run_letters=31) == "glued_fragments"


def test_glued_letters_reach_the_threshold() -> None:
    assert kind_of(glued_runs([32, 32, 32]), garbled_glued_letters=96) == "glued_fragments"
    assert kind_of(glued_runs([32, 32, 32]), garbled_glued_letters=97) is None


def test_glued_letters_are_most_of_the_window() -> None:
    # 96 glued letters, 32 ordinary ones between them: 75%; 34: 73.8%.
    assert kind_of(glued_around_words(32)) == "glued_fragments"
    assert kind_of(glued_around_words(34)) is None
    assert kind_of(glued_around_words(34), garbled_glued_share=0.73) == "glued_fragments"


def test_glued_runs_lie_within_the_window() -> None:
    # Three runs of 32 from the first letter to the last: 400 characters, then 401.
    def spread(span: int) -> str:
        gap = span - 96
        return GLUED[:32] + "." * (gap // 2) + GLUED[7:39] + "." * (gap - gap // 2) + GLUED[14:46]
    assert kind_of(spread(400)) == "glued_fragments"
    assert kind_of(spread(401)) is None
    assert kind_of(spread(401), garbled_fragment_window_chars=401) == "glued_fragments"


def test_one_run_three_times_the_shortest_is_a_reply_glued_whole() -> None:
    assert kind_of(GLUED[:96]) == "glued_fragments"
    assert kind_of(GLUED[:95]) is None


@pytest.mark.parametrize("text", [
    "requestTokenCacheBlockManagerFactory " * 12,  # camelCase: a capital every word
    "atgcgtacgttagcatgcatgcaaatgcgtacgttagcatgcatgcaaatgcgtacgttagcatgca\n" * 6,  # DNA
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 " * 8,  # hashes
    "AAAAB3NzaC1yc2EAAAADAQABAAABgQC7vbqajDhA+Kq0HyTKQLMmHd0tOpG2ZuRYbZsk" * 6,  # base64
    "Zwei Wörter: Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz und "
    "Grundstücksverkehrsgenehmigungszuständigkeitsübertragungsverordnung.",
])
def test_long_identifiers_sequences_and_compounds_are_not_glued(text: str) -> None:
    assert kind_of(text) is None


def spaced(count: int) -> str:
    return " ".join("theuserwantstheaccountupgradedtobusiness"[:count])


def test_twenty_four_spaced_letters_are_salad_and_twenty_three_are_not() -> None:
    assert kind_of(PROSE + spaced(24) + " " + PROSE) == "spaced_letters"
    assert kind_of(PROSE + spaced(23) + " " + PROSE) is None
    assert kind_of(PROSE + spaced(23) + " ", garbled_spaced_letters=23) == "spaced_letters"
    assert kind_of(" _ ".join(spaced(12) for _ in range(2))) == "spaced_letters"  # 24, with a "_"


def test_the_alphabet_spelled_out_is_not_salad() -> None:
    assert kind_of("The alphabet: " + " ".join(string.ascii_uppercase) + ".") is None


# --------------------------------------------------------------------- statistics


def shuffled_words(vocab: list[str], count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(vocab) for _ in range(count)]


def bigram_ratio(words: list[str]) -> float:
    """What the rule measures: distinct word pairs over a random order's expectation."""
    distinct = len(set(words))
    pairs = len(set(itertools.pairwise(words)))
    cells = distinct ** 2
    return pairs / (cells * -math.expm1(-(len(words) - 1) / cells))


VOCAB = "account upgrade business plan cancel invoice term seat".split()


def test_a_handful_of_words_shuffled_is_salad() -> None:
    words = shuffled_words(VOCAB, 32)
    ratio = bigram_ratio(words)
    assert ratio >= 0.85
    text = " ".join(words)
    assert kind_of(text) == "shuffled_words"
    assert kind_of(text, garbled_shuffle_min_bigram_ratio=ratio - EPS) == "shuffled_words"
    assert kind_of(text, garbled_shuffle_min_bigram_ratio=ratio + 0.01) is None
    _, detail, _ = judge(text)
    assert f"{len(set(words))} distinct" in detail and f"{ratio:.2f}" in detail


def test_the_handful_has_five_to_twelve_words() -> None:
    words = shuffled_words(VOCAB, 32)
    distinct = len(set(words))
    text = " ".join(words)
    assert kind_of(text, garbled_shuffle_max_distinct=distinct) == "shuffled_words"
    assert kind_of(text, garbled_shuffle_max_distinct=distinct - 1) is None
    assert kind_of(text, garbled_shuffle_min_distinct=distinct + 1) is None
    # Two or three words repeated are a yes/no list, thirteen or more a vocabulary.
    assert kind_of(" ".join(shuffled_words(["yes", "no", "maybe"], 64))) is None
    many = [f"{w}{s}" for w in VOCAB for s in ("", "s")][:16]
    assert len(set(shuffled_words(many, 32))) > 12
    # More than a handful is no longer this detector's: a vocabulary without function
    # words is `no_function_words`' (garbled.words).
    assert kind_of(" ".join(shuffled_words(many, 32)), garbled_function_share=0) is None
    assert kind_of(" ".join(shuffled_words(many, 32))) == "no_function_words"


def test_the_window_is_32_words() -> None:
    words = shuffled_words(VOCAB, 31)
    assert kind_of(" ".join(words)) is None  # fewer words than the window
    assert kind_of(" ".join(words), garbled_shuffle_window_words=31) == "shuffled_words"


def test_a_table_or_a_list_of_few_words_is_not_shuffled() -> None:
    values = shuffled_words(VOCAB, 40)
    assert kind_of(" ".join(values)) == "shuffled_words"
    assert kind_of("\n".join(f"| {a} | {b} |" for a, b in itertools.pairwise(values))) is None
    assert kind_of(", ".join(values)) is None


def test_single_letters_are_not_words_of_a_handful() -> None:
    # An answer key, a melody: a few letters in random order, honestly.
    letters = " ".join(shuffled_words(list("ABCDEFG"), 64))
    assert kind_of(f"Answers: {letters}") is None
    assert kind_of(" ".join(shuffled_words(["do", "re", "mi", "fa", "so", "la", "ti"], 64))) \
        == "shuffled_words"


def test_lorem_ipsum_and_a_loop_are_not_shuffled() -> None:
    lorem = FAMILIES["lorem_ipsum"](3)
    assert kind_of(lorem.content or lorem.reasoning) is None
    loop = "Wait, the user wants to upgrade XEHM4B to business, then cancel it. " * 20
    assert kind_of(loop) is None  # a loop repeats its pairs: reasoning_loop's business


def noise(size: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits + string.punctuation + " ")
                   for _ in range(size))


def noise_stats(window: str) -> tuple[float, float, float]:
    counts = Counter(window)
    bits = -sum(n / len(window) * math.log2(n / len(window)) for n in counts.values())
    pairs = len(set(itertools.pairwise(window))) / (len(window) - 1)
    symbols = sum(c in string.punctuation for c in window) / len(window)
    return bits, pairs, symbols


def test_printable_noise_of_192_characters_is_salad() -> None:
    assert kind_of(noise(192)) == "noise"
    # Windows lie a quarter apart: a burst among prose is whole in one at 240.
    assert kind_of(PROSE + noise(240) + " " + PROSE) == "noise"
    assert kind_of(noise(191)) is None
    assert kind_of(noise(191), garbled_noise_window_chars=191) == "noise"


def test_noise_thresholds() -> None:
    text = noise(192)
    bits, pairs, symbols = noise_stats(text)
    assert kind_of(text, garbled_noise_min_bits=bits - EPS) == "noise"
    assert kind_of(text, garbled_noise_min_bits=bits + 0.01) is None
    assert kind_of(text, garbled_noise_min_distinct_pairs=pairs - EPS) == "noise"
    assert kind_of(text, garbled_noise_min_distinct_pairs=pairs + 0.01) is None
    assert kind_of(text, garbled_noise_min_symbol_share=symbols - EPS) == "noise"
    assert kind_of(text, garbled_noise_min_symbol_share=symbols + 0.01) is None
    _, detail, excerpt = judge(text)
    assert f"{bits:.2f} bits" in detail and len(excerpt) == EXCERPT_CHARS


def test_random_strings_one_to_a_line_are_a_list_not_noise() -> None:
    rng = random.Random(3)
    alphabet = string.ascii_letters + string.digits + string.punctuation
    items = ["".join(rng.choices(alphabet, k=64)) for _ in range(6)]
    assert kind_of("Your keys:\n\n" + "\n".join(items)) is None
    assert kind_of("Your keys:\n\n" + "\n".join(f"{i}. {x}" for i, x in enumerate(items))) \
        is None
    assert kind_of("Your keys: " + " ".join(items)) == "noise"


@pytest.mark.parametrize("family", ["base64_blobs", "hashes_uuids", "passwords", "code",
                                    "minified_json"])
def test_formats_are_not_noise(family: str) -> None:
    for seed in range(6):
        reply = FAMILIES[family](seed)
        for text in (reply.content, reply.reasoning):
            assert kind_of(text) is None, (family, seed)


# ------------------------------------------------------------- fields and findings


def call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


SALAD = salad.multilingual(0, 60)


def test_each_field_is_judged_and_named() -> None:
    assert find_garble(rec(reasoning=SALAD, content="ok"), VerdictConfig()).field == "reasoning"
    assert find_garble(rec(reasoning="ok", content=SALAD), VerdictConfig()).field == "content"
    args = json.dumps({"account_id": "XEHM4B", "plan": "business",
                       "notes": [{"text": "fine"}, {"text": SALAD}]})
    found = find_garble(rec(tool_calls=[call("change_plan", args)]), VerdictConfig())
    assert found.field == "call 0 change_plan.notes[1].text"
    raw = '{"account_id": "' + SALAD  # does not parse: judged as it is
    found = find_garble(rec(tool_calls=[call("change_plan", "{}"), call("x", raw)]),
                        VerdictConfig())
    assert found.field == "call 1 x arguments"


def test_arguments_nested_as_deep_as_json_allows_are_walked() -> None:
    deep = '{"a": ' * 1000 + json.dumps(SALAD) + "}" * 1000
    found = find_garble(rec(tool_calls=[call("change_plan", deep)]), VerdictConfig())
    assert found.field == "call 0 change_plan" + ".a" * 1000


def test_clean_replies_have_no_finding() -> None:
    args = json.dumps({"account_id": "XEHM4B", "plan": "business"})
    assert find_garble(rec(reasoning=PROSE, content=PROSE,
                           tool_calls=[call("change_plan", args)]), VerdictConfig()) is None


def test_classify_gives_garbled_with_its_finding() -> None:
    record = rec(reasoning=PROSE, content=PROSE + SALAD)
    verdicts = classify(record, VerdictConfig())
    assert verdicts[0] == "garbled"
    finding = record.findings["garbled"]
    assert set(finding) == {"field", "kind", "detail", "excerpt"}
    assert finding["field"] == "content" and finding["kind"] == "scripts"
    assert 0 < len(finding["excerpt"]) <= EXCERPT_CHARS
    assert GarbleFinding.model_validate(finding) == find_garble(record, VerdictConfig())


def test_the_request_scripts_on_the_record_explain_the_reply() -> None:
    text = "ан的ан的ан的ан"
    assert find_garble(rec(content=text), VerdictConfig()) is not None
    assert find_garble(rec(content=text, params={"scripts": ["Cyrillic"]}), VerdictConfig()) \
        is None


# ------------------------------------------------------------------------- config


def test_garbled_false_switches_the_verdict_off() -> None:
    record = rec(content=SALAD)
    assert "garbled" in classify(record, VerdictConfig())
    record = rec(content=SALAD)
    assert "garbled" not in classify(record, VerdictConfig(garbled=False))
    assert "garbled" not in record.findings
    scenario = Scenario.model_validate({"verdicts": {"garbled": False}})
    assert scenario.verdicts.garbled is False


@pytest.mark.parametrize("keys", [
    {"garbled_marker_burst": 1}, {"garbled_script_switches": 1},
    {"garbled_glued_share": 0}, {"garbled_glued_share": 1.5},
    {"garbled_noise_min_distinct_pairs": 1.1}, {"garbled_glued_run_letters": 15},
    {"garbled_shuffle_min_distinct": 9, "garbled_shuffle_max_distinct": 8},
    {"garbled_shuffle_max_distinct": 32},  # must stay below the window
    {"garbled_glued_run_letters": 100, "garbled_glued_letters": 96},
    {"garbled_typo": 1},
])
def test_bad_garbled_keys_are_refused(keys: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        VerdictConfig(**keys)


# ---------------------------------------------------------------- request scripts


def test_request_scripts() -> None:
    assert request_scripts([{"role": "user", "content": "Upgrade XEHM4B, please."}]) == []
    assert request_scripts([
        {"role": "system", "content": [{"type": "text", "text": "Отвечай по-русски."}]},
        {"role": "user", "content": "请升级账户 XEHM4B"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"function": {"name": "x", "arguments": '{"q": "안녕"}'}}]},
    ]) == ["Cyrillic", "Han", "Hangul"]
    assert text_scripts("été, Ελλάδα, ー, 123, 🚀") == {"Latin", "Greek"}


def test_the_request_maker_puts_the_scripts_on_the_record() -> None:
    maker = RequestMaker(Scenario(), "run", "model")
    russian = WorkItem("a", [{"role": "user", "content": "Переведи тариф на business."}])
    english = WorkItem("b", [{"role": "user", "content": "Upgrade the plan."}])
    record = maker.record("measurement", 0, russian, "http://x", maker.body(russian))
    assert record.params["scripts"] == ["Cyrillic"]
    record = maker.record("measurement", 1, english, "http://x", maker.body(english))
    assert "scripts" not in record.params


# ---------------------------------------------------------------------- corpora


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_honest_family_is_not_garbled(family: str) -> None:
    for seed in range(20):
        reply = FAMILIES[family](seed)
        record = rec(params=reply.params, finish_reason=reply.finish_reason,
                     reasoning=reply.reasoning, content=reply.content,
                     tool_calls=reply.tool_calls)
        assert find_garble(record, VerdictConfig()) is None, (reply.name, record.findings)


def test_the_families_cover_every_field() -> None:
    replies = family_replies()
    assert len(replies) == 20 * len(FAMILIES)
    assert sum(1 for r in replies if r.tool_calls) > len(FAMILIES)
    assert sum(1 for r in replies if len(r.reasoning) > 100) > len(FAMILIES)
    assert sum(1 for r in replies if len(r.content) > 100) > len(FAMILIES)


@pytest.mark.parametrize("kind", sorted(salad.KINDS))
def test_every_salad_sample_is_garbled(kind: str) -> None:
    # From the smallest each kind's rule promises (salad.MIN_TOKENS, the rest from 40).
    for seed in range(8):
        for length in salad.LENGTHS:
            if length < salad.MIN_TOKENS.get(kind, 0):
                continue
            text = salad.KINDS[kind](seed, length)
            if kind == "tool_args":
                record = rec(finish_reason="tool_calls", tool_calls=[call("change_plan", text)])
            else:
                record = rec(content=text)
            found = find_garble(record, VerdictConfig())
            assert found is not None, (kind, seed, length, text[:200])


def test_salad_samples_start_at_forty_tokens() -> None:
    samples = salad.samples(range(1))
    assert {kind for kind, _ in samples} == set(salad.KINDS)
    assert min(len(text) for _, text in samples) >= 40
    assert min(len(text) for kind, text in samples if kind == "noise") >= 192


def test_the_sims_salad_is_caught() -> None:
    # Multilingual sub-word fragments with a short BOS burst among them, as the embedded
    # reference server answers when a row reads another request's KV.
    rng = random.Random(7)
    pieces = salad.CHINESE + salad.CYRILLIC + salad.KOREAN + salad.ENGLISH
    text = "".join(rng.choice(pieces) for _ in range(30)) + BOS * 2 + \
        "".join(rng.choice(pieces) for _ in range(20))
    assert find_garble(rec(reasoning=PROSE, content=text), VerdictConfig()) is not None


# -------------------------------------------------------------------- end to end

SALAD_TURNS = {"load": {"concurrency": 3, "measurement": 9, "first_token_timeout_s": 10},
               "request": {"max_tokens": 256}, "gate": {"prove_below": 0.5}}


def run(tmp_path: Path, url: str, scenario: dict[str, Any]
        ) -> tuple[int, dict[str, Any], Path, str]:
    sc = write_scenario(tmp_path / "s.toml", scenario)
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text()) if out.exists() else {}
    return proc.returncode, summary, out, proc.stdout + proc.stderr


def test_salad_with_a_clean_finish_fails_the_gate(fake_server, tmp_path: Path) -> None:
    modes = ("salad_reasoning", "salad_content", "salad_args")
    fake, srv = fake_server(modes)
    code, summary, out, output = run(tmp_path, srv.url, SALAD_TURNS)
    assert code == 1, output
    measured = summary["phases"]["measurement"]
    assert measured["verdicts"]["garbled"] == 9, measured["verdicts"]
    assert measured["primary_verdicts"] == {"garbled": 9}
    assert summary["gate"]["failures"] == 9
    assert fake.counts == {mode: 3 for mode in modes}
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    fields = Counter(r["findings"]["garbled"]["field"] for r in records)
    assert fields == {"reasoning": 3, "content": 3, "call 0 change_plan.plan": 3}
    # The well-formed calls and the stop finish hide nothing: no other rule saw them.
    assert all(r["finish_reason"] in ("tool_calls", "stop") for r in records)




def test_the_honest_families_pass_the_gate(fake_server, tmp_path: Path) -> None:
    # A sample of every family (each placement: content, reasoning, tool-call argument),
    # replayed: each body names the reply the fake streams. The gate fails on `garbled`
    # alone: the families are this rule's evidence, not the other rules'.
    replies = [make(seed) for make in FAMILIES.values() for seed in range(4)]
    lines = [replay_line(reply, "family sample") for reply in replies]
    (tmp_path / "families.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    _, srv = fake_server()
    code, summary, out, output = run(tmp_path, srv.url, {
        "load": {"measurement": len(lines)}, "request": {"max_tokens": 4096},
        "workload": {"kind": "replay", "path": "families.jsonl"},
        "gate": {"prove_below": 0.2, "fail_on": ["garbled"]}})
    assert code == 0, (output, summary["phases"]["measurement"]["verdicts"])
    assert "garbled" not in summary["phases"]["measurement"]["verdicts"]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == len(lines)
    assert sum(1 for r in records if r["params"].get("scripts") == ["Cyrillic"]) == 1


# ------------------------------------------------------------------ ASCII screens

def _every_detector(text: str, cfg: VerdictConfig) -> str | None:
    """The ASCII path without its screens: every detector, in the same order."""
    import numpy as np

    from loadgen.judge.reply import garbled as g
    from loadgen.judge.text.scripts import code_points

    points = code_points(text)
    cased = g.ASCII_LETTER[points]
    edges = np.flatnonzero(np.diff(np.concatenate(([False], cased, [False])).view(np.int8)))
    starts, ends = edges[0::2], edges[1::2]
    for kind, found in (
            ("markers", lambda: g.markers(text, points, cfg)),
            ("glued_fragments", lambda: g.glued(text, cased, starts, ends, cfg)),
            ("spaced_letters", lambda: g.spaced_letters(text, points, cfg)),
            ("noise", lambda: g.noise(text, points, cfg)),
            ("shuffled_words", lambda: g.shuffled(points, None, (starts, ends), cfg))):
        if found():
            return kind
    return None


def _ascii_texts() -> list[str]:
    texts = [text for _, text in salad.samples() if text.isascii()]
    for reply in family_replies():
        texts += [t for t in (reply.reasoning, reply.content) if t and t.isascii()]
    return texts


@pytest.mark.parametrize("cfg", [VerdictConfig(), VerdictConfig(
    garbled_spaced_letters=8, garbled_glued_run_letters=16, garbled_noise_min_symbol_share=0.05,
    garbled_marker_burst=2)], ids=["defaults", "tight"])
def test_the_ascii_screens_never_hide_a_finding(cfg: VerdictConfig) -> None:
    # Each screen is a necessary condition of its detector: with or without them, every
    # ASCII salad and honest text gets the same finding.
    texts = _ascii_texts()
    assert len(texts) > 200
    for text in texts:
        found = garble_in_text(text, frozenset(), cfg)
        assert (found[0] if found else None) == _every_detector(text, cfg), text[:80]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "Q", "z", " ", "  ", "\n", ".", ",", "#", "{",
                                 "<|eot|>", "\x01", "<0x0A>", "the ", "x y ", "abcdefghij",
                                 "Zq7!", "\t"]), min_size=0, max_size=400))
def test_the_ascii_screens_agree_with_every_detector_on_any_text(parts: list[str]) -> None:
    text = "".join(parts)
    cfg = VerdictConfig(garbled_spaced_letters=8, garbled_glued_run_letters=16,
                        garbled_shuffle_window_words=8, garbled_shuffle_max_distinct=6,
                        garbled_shuffle_min_distinct=3, garbled_noise_window_chars=32,
                        garbled_marker_burst=2)
    found = garble_in_text(text, frozenset(), cfg)
    assert (found[0] if found else None) == _every_detector(text, cfg)
