"""Honest replies a careless judge calls broken, each with the request it answers.

Each family is a shape of honest answer a reviewer built to trip the judge: a request
and a reply that does what the request asked, generated with varied values, lengths and
layouts. The request matters: a Russian answer is honest to a Russian question, ten
copies of a sentence to "write it ten times". `judged(case)` builds the record the way
a run does (the request's scripts and languages from its messages, as `RequestMaker`
works them out) and classifies the reply.

Families:
- greek_symbols: answers in Russian, Korean or Arabic that use Greek letters as symbols
  (angles, sums, units), among honest passages of the same language;
- teach_russian: Chinese or Japanese answers that teach Russian words;
- long_words: English answers naming very long real words (place names, chemicals,
  German compounds);
- spelled_letters: cipher tables, keyboard rows, an alphabet backwards, a word spelled
  letter by letter;
- mojibake_explained: an answer that explains mojibake, showing it;
- french_guillemets: French with no-break spaces inside guillemets and before : ; ! ?;
- env_file: a sample .env file with random secrets;
- ten_times: "write this sentence ten times", done as asked;
- templated_reasoning: reasoning that walks ten table rows or eight invoices with one
  sentence template, then answers.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadgen.judge.reply.request_profile import request_profile
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.support.broken_text import honest_passages

MEMBERS = 16


@dataclass(frozen=True)
class Case:
    """A request and the honest reply to it."""

    name: str
    request: str
    content: str = ""
    reasoning: str = ""
    finish_reason: str = "stop"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def params(self) -> dict[str, Any]:
        return request_profile([{"role": "user", "content": self.request}])


def judged(case: Case) -> RequestRecord:
    record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                           endpoint="http://x", item_id=case.name, params=case.params,
                           finish_reason=case.finish_reason, reasoning=case.reasoning,
                           content=case.content, tool_calls=case.tool_calls)
    record.verdicts = classify(record, VerdictConfig())
    return record


def _rng(family: str, seed: int) -> random.Random:
    return random.Random(f"honest/{family}/{seed}")


GREEK = "αβγδεθλμπσφωΣΩΔ"
GREEK_SENTENCES = {
    "ru": ("Угол {a} равен {n} градусам, а угол {b} — {m} градусам.",
           "Пусть {a} = {n}, тогда {b} = 2{a} − {m}.",
           "Коэффициент {a} показывает, насколько быстро растёт функция.",
           "Сумма {S} по всем слагаемым равна {n}.",
           "Сопротивление измеряется в омах ({O}), а ток — в амперах.",
           "Здесь {a}-частица движется со скоростью {n} км/с."),
    "ko": ("각도 {a}는 {n}도이고 {b}는 {m}도입니다.",
           "{a} 값이 커질수록 함수는 더 빠르게 증가합니다.",
           "여기서 {S}는 모든 항의 합을 뜻합니다.",
           "저항의 단위는 {O}이며 전류는 암페어로 측정합니다.",
           "{a}와 {b}의 비율은 약 {n}:{m}입니다."),
    "ar": ("الزاوية {a} تساوي {n} درجة، والزاوية {b} تساوي {m} درجة.",
           "إذا كانت قيمة {a} أكبر من {n} فإن الدالة تتزايد بسرعة.",
           "يرمز {S} إلى مجموع جميع الحدود.",
           "تقاس المقاومة بوحدة {O} ويقاس التيار بالأمبير.",
           "النسبة بين {a} و{b} هي تقريبا {n} إلى {m}."),
}
GREEK_REQUESTS = {"ru": "Объясни, пожалуйста, эту задачу по геометрии.",
                  "ko": "이 기하학 문제를 설명해 주세요.",
                  "ar": "من فضلك اشرح لي هذه المسألة الهندسية."}


def greek_symbols(seed: int) -> Case:
    rng = _rng("greek", seed)
    lang = ("ru", "ko", "ar")[seed % 3]
    sentences = []
    for _ in range(rng.randint(3, 6)):
        a, b = rng.sample(GREEK, 2)
        sentences.append(rng.choice(GREEK_SENTENCES[lang]).format(
            a=a, b=b, S="Σ", O="Ω", n=rng.randint(2, 90), m=rng.randint(2, 90)))
    if rng.random() < 0.5:
        sentences.insert(rng.randint(0, len(sentences)),
                         rng.choice(honest_passages()[lang])[:300])
    return Case(f"greek_symbols {lang} {seed}", GREEK_REQUESTS[lang], " ".join(sentences))


#: Russian words and their Chinese and Japanese glosses.
RUSSIAN_WORDS = (
    ("привет", "你好", "こんにちは"), ("спасибо", "谢谢", "ありがとう"),
    ("пожалуйста", "请", "どうぞ"), ("книга", "书", "本"), ("вода", "水", "水"),
    ("дом", "房子", "家"), ("друг", "朋友", "友達"), ("кошка", "猫", "猫"),
    ("собака", "狗", "犬"), ("город", "城市", "町"), ("время", "时间", "時間"),
    ("работа", "工作", "仕事"), ("язык", "语言", "言語"), ("школа", "学校", "学校"),
    ("хлеб", "面包", "パン"), ("молоко", "牛奶", "牛乳"), ("солнце", "太阳", "太陽"),
    ("море", "海", "海"), ("утро", "早上", "朝"), ("вечер", "晚上", "夕方"))


def teach_russian(seed: int) -> Case:
    rng = _rng("teach", seed)
    zh = seed % 2 == 0
    picked = rng.sample(RUSSIAN_WORDS, rng.randint(4, 10))
    layout = rng.randrange(3)
    if zh:
        request = "请教我一些常用的俄语单词。"
        lines = [("俄语单词“{r}”的意思是“{g}”。", "{r}（{g}）", "- {r}：{g}")[layout]
                 .format(r=r, g=g) for r, g, _ in picked]
        intro = "好的，下面是一些常用的俄语单词："
    else:
        request = "よく使うロシア語の単語を教えてください。"
        lines = [("ロシア語の「{r}」は「{g}」という意味です。", "{r}（{g}）", "- {r}：{g}")[layout]
                 .format(r=r, g=g) for r, _, g in picked]
        intro = "よく使うロシア語の単語をいくつか紹介します。"
    sep = "\n" if layout else rng.choice(("", "\n"))
    return Case(f"teach_russian {'zh' if zh else 'ja'} {seed}", request,
                intro + "\n" + sep.join(lines))


LONG_WORDS = (
    ("Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch", "a village in Wales"),
    ("Taumatawhakatangihangakoauauotamateaturipukakapikimaungahoronukupokaiwhenuakitanatahu",
     "a hill in New Zealand"),
    ("Chargoggagoggmanchauggagoggchaubunagungamaugg", "a lake in Massachusetts"),
    ("pneumonoultramicroscopicsilicovolcanoconiosis", "a lung disease caused by fine ash"),
    ("dichlorodiphenyltrichloroethane", "the insecticide better known as DDT"),
    ("methylenedioxymethamphetamine", "the compound known as MDMA"),
    ("hexamethylenetetramine", "a compound used in fuel tablets"),
    ("Donaudampfschifffahrtsgesellschaftskapitän", "a German compound for a steamship captain"),
    ("Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz",
     "a former German law on beef labelling"),
    ("floccinaucinihilipilification", "the act of judging something as worthless"),
    ("antidisestablishmentarianism", "opposition to separating church and state"),
    ("supercalifragilisticexpialidocious", "a word from a musical"),
)


def long_words(seed: int) -> Case:
    rng = _rng("long", seed)
    picked = rng.sample(LONG_WORDS, rng.randint(3, 6))
    if seed % 2:
        body = "\n".join(f"- **{w}**: {what}." for w, what in picked)
        content = f"Here are some famously long words:\n{body}"
    else:
        content = " ".join(f"{w} is {what}." for w, what in picked)
    return Case(f"long_words {seed}", "What are some of the longest words you know?", content)


def _spaced(letters: str, sep: str = " ") -> str:
    return sep.join(letters)


def spelled_letters(seed: int) -> Case:
    rng = _rng("spelled", seed)
    upper = string.ascii_uppercase
    kind = seed % 4
    if kind == 0:
        shift = rng.randint(1, 25)
        cipher = upper[shift:] + upper[:shift]
        content = (f"A Caesar cipher with a shift of {shift}:\n\nPlain:  {_spaced(upper)}\n"
                   f"Cipher: {_spaced(cipher)}\n\nSo HELLO becomes "
                   f"{''.join(cipher[upper.index(c)] for c in 'HELLO')}.")
        request = "Show me a Caesar cipher table."
    elif kind == 1:
        rows = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
        if rng.random() < 0.5:
            content = "The QWERTY layout, row by row:\n" + "\n".join(
                _spaced(r.upper()) for r in rows)
        else:
            content = ("On one line, the letter keys from top left to bottom right are "
                       f"{_spaced(''.join(rows))}.")
        request = "What are the rows of a QWERTY keyboard?"
    elif kind == 2:
        content = f"The alphabet backwards: {_spaced(upper[::-1], rng.choice((' ', ', ')))}."
        request = "Say the alphabet backwards."
    else:
        word = rng.choice(("SUPERCALIFRAGILISTICEXPIALIDOCIOUS", "ANTIDISESTABLISHMENTARIANISM",
                           "ACCOMMODATION", "CONSCIENTIOUS"))
        content = f"It is spelled {_spaced(word, rng.choice((' ', '-', '. ')))}."
        request = f"How do you spell {word.lower()}?"
    return Case(f"spelled_letters {seed}", request, content)


MOJIBAKE = (("é", "Ã©"), ("ü", "Ã¼"), ("ñ", "Ã±"), ("ö", "Ã¶"), ("à", "Ã "), ("’", "â€™"),
            ("“", "â€œ"), ("—", "â€”"), ("ç", "Ã§"), ("ß", "ÃŸ"))


def mojibake_explained(seed: int) -> Case:
    rng = _rng("mojibake", seed)
    picked = rng.sample(MOJIBAKE, rng.randint(4, 8))
    quote = rng.choice(("'{}'", "`{}`", "{}", "“{}”"))
    if seed % 2:
        lines = "\n".join(f"- {quote.format(good)} shows up as {quote.format(bad)}"
                          for good, bad in picked)
        content = ("This is mojibake: UTF-8 bytes decoded as Latin-1 (or Windows-1252). "
                   f"Typical examples:\n{lines}\nDecode the bytes as UTF-8 to fix it.")
    else:
        pairs = ", ".join(f"{quote.format(good)} becomes {quote.format(bad)}"
                          for good, bad in picked)
        content = (f"When UTF-8 text is read as Latin-1, each accented letter turns into two "
                   f"or three characters: {pairs}. Re-read the file as UTF-8.")
    return Case(f"mojibake_explained {seed}", "Why does my text show Ã© instead of é?",
                content)


FRENCH = ("Le client a écrit\u00a0: «\u00a0Merci pour votre aide\u00a0!\u00a0»",
          "Attention\u202f: la résiliation prend effet à la fin du mois.",
          "Voulez-vous passer à l'offre «\u202fBusiness\u202f»\u202f?",
          "Le compte a été mis à niveau\u00a0; la facture sera envoyée demain.",
          "Comme il l'a dit\u00a0: «\u00a0Tout est en ordre\u00a0».",
          "Le montant est de 1\u202f234,50\u00a0€ pour le trimestre.",
          "Nous avons reçu votre demande\u00a0: elle sera traitée sous 48\u00a0heures.")


def french_guillemets(seed: int) -> Case:
    rng = _rng("french", seed)
    sentences = rng.sample(FRENCH, rng.randint(3, 6))
    if rng.random() < 0.5:
        sentences.insert(1, rng.choice(honest_passages()["fr"])[:250])
    return Case(f"french_guillemets {seed}",
                "Pouvez-vous me répondre en français, s'il vous plaît ?", " ".join(sentences))


def _secret(rng: random.Random, size: int, symbols: bool) -> str:
    alphabet = string.ascii_letters + string.digits + ("!@#$%^&*()-_=+[]{}<>?" if symbols else "")
    return "".join(rng.choice(alphabet) for _ in range(size))


def env_file(seed: int) -> Case:
    rng = _rng("env", seed)
    lines = [f"DATABASE_URL=postgres://app:{_secret(rng, 16, False)}@db:5432/billing",
             f"SECRET_KEY={_secret(rng, rng.randint(40, 64), True)}",
             f"API_TOKEN=sk-{_secret(rng, 48, False)}",
             f"JWT_SECRET='{_secret(rng, 32, True)}'",
             f"SESSION_SALT={_secret(rng, 24, True)}",
             "DEBUG=false", f"PORT={rng.randint(3000, 9000)}"]
    rng.shuffle(lines)
    body = "\n".join(lines[:rng.randint(4, 7)])
    fence = rng.random() < 0.6
    content = ("Here is a sample `.env` file; replace every secret before you use it:\n\n"
               + (f"```dotenv\n{body}\n```" if fence else body)
               + "\n\nNever commit this file to version control.")
    return Case(f"env_file {seed}", "Show me a sample .env file with secrets.", content)


SENTENCES = ("I will not talk in class.", "The quick brown fox jumps over the lazy dog.",
             "Practice makes perfect.", "All work and no play makes Jack a dull boy.",
             "Я буду внимательно читать условие задачи.")


def ten_times(seed: int) -> Case:
    rng = _rng("ten", seed)
    sentence = rng.choice(SENTENCES)
    times = rng.choice((5, 8, 10, 12, 20))
    words = {5: "five", 8: "eight", 10: "ten", 12: "twelve", 20: "twenty"}[times]
    request = (f"Write the sentence \"{sentence}\" {rng.choice((words, str(times)))} times."
               if not sentence.startswith("Я") else
               f"Напиши предложение «{sentence}» {times} раз.")
    layout = rng.randrange(3)
    lines = [(sentence, f"{i}. {sentence}", sentence)[layout] for i in range(1, times + 1)]
    content = ("\n" if layout < 2 else " ").join(lines)
    return Case(f"ten_times {seed}", request, content)


def templated_reasoning(seed: int) -> Case:
    rng = _rng("template", seed)
    if seed % 2:
        count = 8
        rows = []
        total = 0.0
        for _ in range(count):
            amount = rng.randint(1000, 90000) / 100
            total += amount
            rows.append(f"Invoice INV-{rng.randint(1000, 9999)} is {amount:.2f} dollars, "
                        f"issued on 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}, "
                        f"and it is {'paid' if rng.random() < 0.7 else 'open'}.")
        reasoning = " ".join(rows) + f" Adding them up gives {total:.2f} dollars."
        content = f"The eight invoices total {total:.2f} dollars."
        request = "What do the eight invoices in the table add up to?"
    else:
        rows = []
        plans = ("free", "pro", "business", "enterprise")
        keep = 0
        for i in range(1, 11):
            plan = rng.choice(plans)
            seats = rng.randint(1, 200)
            keep += plan != "free"
            rows.append(f"Row {i}: account {_secret(rng, 6, False).upper()} is on the {plan} "
                        f"plan with {seats} seats, so it {'stays' if plan != 'free' else 'goes'}.")
        reasoning = " ".join(rows) + f" That makes {keep} accounts that stay."
        content = f"{keep} of the ten accounts in the table stay on a paid plan."
        request = "How many of the ten accounts in the table stay on a paid plan?"
    return Case(f"templated_reasoning {seed}", request, content, reasoning=reasoning)


FAMILIES: dict[str, Callable[[int], Case]] = {
    "greek_symbols": greek_symbols, "teach_russian": teach_russian, "long_words": long_words,
    "spelled_letters": spelled_letters, "mojibake_explained": mojibake_explained,
    "french_guillemets": french_guillemets, "env_file": env_file, "ten_times": ten_times,
    "templated_reasoning": templated_reasoning,
}


def honest_cases(members: int = MEMBERS) -> list[Case]:
    return [make(seed) for make in FAMILIES.values() for seed in range(members)]
