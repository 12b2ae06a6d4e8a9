"""Generated families of requests and answers for the language rules (`wrong_language`,
and `garbled` on honest mixed text).

- whole answers in scripts written without spaces (Chinese, Japanese, Thai) to requests
  that asked for another language, named it in some language, or named none;
- languages named by their names in other languages and by aliases (Norwegian, Bokmål,
  Nynorsk, Flemish, Valencian, Moldovan, Castilian, Farsi, Mandarin...), answered in the
  named language (honest) or in a third one (wrong);
- honest code-switching (Hinglish, Spanglish, Taglish, Swiss German), composed from
  small vocabularies, to requests that are code-switched themselves or name the mix;
- honest Chinese and Japanese answers that teach Russian words, set off by spaces,
  quotes or brackets; French with no-break spaces inside guillemets and before ; : ! ?

Each family is a list of `Case` (tests/support/honest_requests.py), generated from
seeds so a test measures counts over many variants.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache

import langcodes
import regex

from tests.support.broken_text import honest_passages
from tests.support.honest_requests import Case

QUESTION = "What should I check before I upgrade the production database?"

#: Phrasings of "answer in <name>", one per language the phrasing is written in; the
#: name is the language's name in that language (CLDR, through langcodes).
PHRASINGS: dict[str, tuple[str, ...]] = {
    "en": ("Please answer in {name}. {q}", "{q} Reply in {name}, please.",
           "Write your answer in {name}: {q}"),
    "fr": ("Réponds en {name}, s'il te plaît. {q}", "{q} Merci de répondre en {name}."),
    "de": ("Antworte bitte auf {name}. {q}", "{q} Bitte auf {name} antworten."),
    "es": ("Responde en {name}, por favor. {q}", "{q} Contesta en {name}."),
    "ru": ("Ответь, пожалуйста, язык ответа: {name}. {q}",),
    "zh": ("请用{name}回答：{q}", "{q}（请用{name}回答）"),
    "ja": ("{name}で答えてください。{q}",),
}


def _russian_inflections(name: str) -> list[str]:
    """"на французском", "по-французски" from "французский"."""
    if not name.endswith("ий"):
        return []
    stem = name[:-2]
    return [f"Ответь на {stem}ом языке. {{q}}", f"Ответь по-{stem}и, пожалуйста. {{q}}"]


def naming_requests(lang: str) -> list[str]:
    """Requests that name `lang` in each phrasing's own language."""
    target = langcodes.Language.get(lang)
    out = []
    for locale, forms in PHRASINGS.items():
        name = target.display_name(locale)
        out += [form.format(name=name, q=QUESTION) for form in forms]
        if locale == "ru":
            out += [form.format(q=QUESTION) for form in _russian_inflections(name)]
    out.append(f"Please answer in {target.autonym()}. {QUESTION}")
    return out


#: Short honest answers in languages the fixture passages lack (about database upgrades).
EXTRA_ANSWERS: dict[str, tuple[str, ...]] = {
    "nb": ("Databasen må sikkerhetskopieres før oppgraderingen starter.",
           "Vi anbefaler å teste den nye versjonen på en egen server først.",
           "Hvis noe går galt, kan du gjenopprette dataene fra sikkerhetskopien.",
           "Husk å informere brukerne om nedetiden i god tid før du begynner."),
    "nn": ("Du må ta tryggingskopi av databasen før oppgraderinga startar.",
           "Vi tilrår å prøve den nye versjonen på ein eigen tenar fyrst.",
           "Dersom noko går gale, kan du hente fram att dataa frå tryggingskopien.",
           "Hugs å gje brukarane beskjed om nedetida i god tid før du byrjar."),
    "nl": ("Maak eerst een reservekopie van de database voordat de upgrade begint.",
           "We raden aan om de nieuwe versie eerst op een aparte server te testen.",
           "Als er iets misgaat, kun je de gegevens terugzetten vanuit de reservekopie.",
           "Vergeet niet de gebruikers op tijd te informeren over de onderbreking."),
    "ca": ("Cal fer una còpia de seguretat de la base de dades abans de començar.",
           "Us recomanem que proveu primer la nova versió en un servidor a banda.",
           "Si alguna cosa va malament, podeu recuperar les dades de la còpia.",
           "Recordeu avisar els usuaris de la interrupció amb prou temps."),
    "ro": ("Faceți o copie de rezervă a bazei de date înainte de a începe actualizarea.",
           "Vă recomandăm să testați mai întâi noua versiune pe un server separat.",
           "Dacă ceva nu merge bine, puteți restaura datele din copia de rezervă.",
           "Nu uitați să anunțați utilizatorii despre întrerupere din timp."),
}


def answer(lang: str, rng: random.Random) -> str:
    """An honest answer in `lang`: a fixture passage, or sentences composed in order."""
    if lang in EXTRA_ANSWERS:
        sentences = list(EXTRA_ANSWERS[lang])
        rng.shuffle(sentences)
        return " ".join(sentences[:rng.randint(3, 4)])
    return rng.choice(_long_passages(lang))


#: A sentence of plain words: letters (and marks, apostrophes, Persian's zero-width
#: non-joiner inside a word), separated by single spaces and light punctuation; no
#: paths, options, hyphenated commands, numbers or markup that break running text.
_PLAIN_WORD = regex.compile(r"^[\p{L}\p{M}][\p{L}\p{M}'’\u200c\u200d]*[,.;:!?،؛؟]?$")
#: Plain words in a row an answer needs to be judged (the judge's run of running text
#: is twelve; two to spare for a word the judge splits).
PLAIN_RUN = 14


def _plain_run(line: str) -> int:
    """The longest run of plain words in a line."""
    best = run = 0
    for word in line.split():
        run = run + 1 if _PLAIN_WORD.match(word) else 0
        best = max(best, run)
    return best


@cache
def _long_passages(lang: str) -> tuple[str, ...]:
    """The fixture passages long enough to be judged: a line of `PLAIN_RUN` plain words
    in a row (a caption of eight words, or a message broken by paths and options, is
    not), or of sixty characters in a script written without spaces. Read once a
    language: a family draws thousands of answers from them."""
    unspaced = lang in UNSPACED
    return tuple(p for p in honest_passages()[lang]
                 if any(len(line) >= 60 if unspaced else _plain_run(line) >= PLAIN_RUN
                        for line in p.splitlines()))


#: Names and aliases a request may use -> the language an honest answer is written in.
ALIASES: dict[str, tuple[str, ...]] = {
    "nb": ("Norwegian", "Bokmål", "Norwegian Bokmål", "norsk", "норвежском", "挪威语"),
    "nn": ("Nynorsk", "Norwegian", "norsk nynorsk", "Norwegian Nynorsk"),
    "nl": ("Flemish", "Dutch", "Vlaams", "néerlandais", "Niederländisch", "荷兰语"),
    "ca": ("Valencian", "Catalan", "valencià", "català", "加泰罗尼亚语"),
    "ro": ("Moldovan", "Romanian", "roumain", "Rumänisch"),
    "es": ("Castilian", "castellano", "Spanish", "西班牙语"),
    "fa": ("Farsi", "Persian", "فارسی", "波斯语"),
    "zh": ("Mandarin", "Cantonese", "普通话", "粤语", "Chinese", "中文"),
    "de": ("Swiss German", "Schweizerdeutsch", "Deutsch", "Alemannic"),
    "uk": ("Ukrainian", "українська", "украинском"),
}

ALIAS_FORMS = ("Please reply in {name}. {q}", "{q} Answer in {name}.", "{name}: {q}",
               "Réponds en {name}. {q}", "请用{name}回答：{q}")

#: The languages answers may be written in, honest passages or composed sentences.
ANSWER_LANGUAGES = (*sorted(honest_passages()), *sorted(EXTRA_ANSWERS))

#: Pairs a judge cannot tell apart from text alone, that a request naming one allows.
CLOSE = {frozenset(p) for p in (("nb", "nn"), ("zh", "ja"))}


def _third(rng: random.Random, allowed: set[str]) -> str:
    """An answer language far from every allowed one."""
    others = [lang for lang in ANSWER_LANGUAGES if lang not in allowed
              and not any(frozenset((lang, a)) in CLOSE for a in allowed)]
    return rng.choice(others)


def named_family(seeds: int = 4) -> tuple[list[Case], list[Case]]:
    """(honest, wrong): every language of the fixtures named in every phrasing, answered
    in it and in a third language; and every alias, answered likewise."""
    honest: list[Case] = []
    wrong: list[Case] = []
    for lang in ANSWER_LANGUAGES:
        if lang in EXTRA_ANSWERS:
            continue
        for i, request in enumerate(naming_requests(lang)):
            for seed in range(seeds):
                rng = random.Random(f"named/{lang}/{i}/{seed}")
                honest.append(Case(f"named {lang} {i} {seed}", request, answer(lang, rng)))
                other = _third(rng, {lang, "en", "fr", "de", "es", "ru", "zh", "ja"})
                wrong.append(Case(f"named {lang} {i} {seed} -> {other}", request,
                                  answer(other, rng)))
    for lang, names in ALIASES.items():
        for name in names:
            for j, form in enumerate(ALIAS_FORMS):
                for seed in range(seeds):
                    rng = random.Random(f"alias/{lang}/{name}/{j}/{seed}")
                    request = form.format(name=name, q=QUESTION)
                    honest.append(Case(f"alias {name} {j} {seed}", request,
                                       answer(lang, rng)))
                    other = _third(rng, {lang, "en", "fr", "zh", "nl", "de", "ca", "es",
                                         "ro", "ru", "nb", "nn", "uk"})
                    wrong.append(Case(f"alias {name} {j} {seed} -> {other}", request,
                                      answer(other, rng)))
    return honest, wrong


# ------------------------------------------------------------ unspaced scripts

#: Japanese written in kana alone (a children's book, a beginner's answer).
KANA_WORDS = ("きょうは", "あしたは", "わたしは", "ともだちと", "がっこうで", "いっしょに",
              "ごはんを", "たべました", "べんきょうを", "しました", "こうえんに", "いきます",
              "とても", "たのしかったです", "あめが", "ふっています", "ほんを", "よみます")


def kana_text(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(4, 7)):
        sentences.append("".join(rng.sample(KANA_WORDS, rng.randint(3, 5))) + "。")
    return "".join(sentences)


UNSPACED = ("zh", "ja", "th")
#: Requests that leave no room for an answer in Chinese, Japanese or Thai.
NOT_UNSPACED_REQUESTS = (
    QUESTION, f"Please answer in English. {QUESTION}", f"{QUESTION} Reply in French.",
    "Réponds en français : que faut-il vérifier avant la mise à jour de la base ?",
    "Antworte bitte auf Deutsch: Was muss ich vor dem Update prüfen?",
    "Ответь по-русски: что проверить перед обновлением базы данных?",
    f"Answer in Korean, please. {QUESTION}")


def unspaced_family(seeds: int = 8) -> tuple[list[Case], list[Case]]:
    """(honest, wrong): Chinese, Japanese and Thai answers to requests that asked for
    them (wrong: that asked for another language or named none, in English or not), and
    Japanese in kana alone or Thai to a request in Chinese."""
    honest: list[Case] = []
    wrong: list[Case] = []
    for lang in UNSPACED:
        for i, request in enumerate(NOT_UNSPACED_REQUESTS):
            for seed in range(seeds):
                rng = random.Random(f"unspaced/{lang}/{i}/{seed}")
                wrong.append(Case(f"unspaced {lang} {i} {seed}", request, answer(lang, rng)))
        for i, request in enumerate(naming_requests(lang)):
            for seed in range(seeds // 2):
                rng = random.Random(f"unspaced-ok/{lang}/{i}/{seed}")
                honest.append(Case(f"unspaced ok {lang} {i} {seed}", request,
                                   answer(lang, rng)))
    chinese = ("请用中文回答：升级数据库之前需要检查什么？",
               "升级生产数据库之前，我应该检查哪些内容？")
    for i, request in enumerate(chinese):
        for seed in range(seeds):
            rng = random.Random(f"unspaced-zh/{i}/{seed}")
            wrong.append(Case(f"zh asked, kana {i} {seed}", request, kana_text(rng)))
            wrong.append(Case(f"zh asked, thai {i} {seed}", request, answer("th", rng)))
            honest.append(Case(f"zh asked {i} {seed}", request, answer("zh", rng)))
        honest.append(Case(f"kana asked {i}", "ひらがなだけで こたえて ください。",
                           kana_text(random.Random(i))))
    return honest, wrong


# ------------------------------------------------------------- code-switching

MIXES: dict[str, dict[str, tuple[str, ...]]] = {
    "hinglish": {
        "own": ("main abhi office mein hoon", "kal meeting bahut lambi thi",
                "server phir se down ho gaya", "mujhe thoda time chahiye",
                "ye bug bahut pareshan kar raha hai", "tum deploy kab karoge",
                "sab log ghar ja chuke hain", "aaj kaam bahut zyada hai"),
        "lead": ("Yaar", "Dekho", "Acha", "Suno", "Arre"),
        "names": ("Hinglish",)},
    "spanglish": {
        "own": ("no sé qué pasó con el servidor", "mañana tenemos la reunión",
                "necesito que me mandes el reporte", "está bien, lo reviso luego",
                "mi jefe está bien enojado", "ya casi terminamos el proyecto",
                "vamos a comer algo después", "no tengo tiempo hoy"),
        "lead": ("Oye", "Mira", "Bueno", "Pues", "Ay"),
        "names": ("Spanglish",)},
    "taglish": {
        "own": ("hindi ko pa nakikita yung email", "bukas na lang natin ayusin",
                "ako na bahala dito", "ang bagal ng internet ngayon",
                "kailangan ko pa i-check yung numbers", "sabay na tayo mag-lunch",
                "wala pa akong update galing sa kanila", "medyo pagod na ako"),
        "lead": ("Sige", "Grabe", "Ay naku", "Teka", "Uy"),
        "names": ("Taglish",)},
    "swiss_german": {
        "own": ("mir händ hüt am drüü es Meeting", "chasch mer bitte de Bricht schicke",
                "ich ha de Server nomal neu gstartet", "das isch no nöd ganz fertig",
                "mir luege das denn morn aa", "es hät es Problem mit em Update gää",
                "ich bi grad no am schaffe", "mir chönd das spöter no bespräche"),
        "lead": ("Hoi zäme", "Merci vielmal", "Sali", "Grüezi", "Exgüsi"),
        "names": ("Swiss German", "Schweizerdeutsch", "Alemannic")},
}
ENGLISH_CLAUSES = ("I will check the logs", "the release is tomorrow",
                   "please send me the report", "we need to fix this before Friday",
                   "the build failed again", "let me know when you are free",
                   "the client is waiting for an answer", "I already pushed the fix")
JOINS = ("{a}, but {b}.", "{a}, {b}.", "{a} and {b}.", "{a}. {b}.", "{a}, so {b}.")


def mixed_text(mix: str, rng: random.Random, english: bool = True) -> str:
    """Sentences of a code-switched variety: its own clauses with English ones."""
    vocab = MIXES[mix]
    out = []
    for k in range(rng.randint(4, 7)):
        a = rng.choice(vocab["own"])
        b = rng.choice(ENGLISH_CLAUSES if english else vocab["own"])
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        sentence = rng.choice(JOINS).format(a=a, b=b)
        if k == 0:
            sentence = f"{rng.choice(vocab['lead'])}, {sentence}"
        out.append(sentence[0].upper() + sentence[1:])
    return " ".join(out)


def code_switch_family(seeds: int = 12) -> tuple[list[Case], list[Case]]:
    """(honest, wrong): code-switched answers (and, for Swiss German, answers in the
    dialect alone) to code-switched requests or to requests that name the mix; the
    same requests answered wholly in a third language, and wholly in Russian."""
    honest: list[Case] = []
    wrong: list[Case] = []
    for mix, vocab in MIXES.items():
        for seed in range(seeds):
            rng = random.Random(f"mix/{mix}/{seed}")
            requests = [mixed_text(mix, rng)[:160],
                        f"Reply in {rng.choice(vocab['names'])}, please. {QUESTION}"]
            for i, request in enumerate(requests):
                reply = mixed_text(mix, rng, english=mix != "swiss_german" or seed % 2 == 0)
                honest.append(Case(f"{mix} {i} {seed}", request, reply))
                other = _third(rng, {"en", "es", "de", "nl", "tl", "fr", "hi"} | set(
                    ("it", "pt", "ca")))
                wrong.append(Case(f"{mix} {i} {seed} -> {other}", request,
                                  answer(other, rng)))
                # Wholly Russian: no English mixed in, in a language nobody invited.
                wrong.append(Case(f"{mix} {i} {seed} -> ru", request, answer("ru", rng)))
    return honest, wrong


# --------------------------------------------- two honest shapes that tripped the judge

RUSSIAN_TERMS = ("привет", "спасибо", "пожалуйста", "книга", "вода", "дом", "друг",
                 "кошка", "собака", "город", "время", "работа", "язык", "школа", "хлеб",
                 "молоко", "солнце", "море", "утро", "вечер", "до свидания", "доброе утро")
ZH_FRAMES = ("俄语里 {r} 的意思是“{n}”。", "{r} 这个词很常用。", "比如 {r}，读音比较简单。",
             "你可以说 {r} ，意思是第{n}个例子。", "- {r}：第{n}个单词", "「{r}」是常见的词。")
JA_FRAMES = ("ロシア語の {r} は「{n}」という意味です。", "{r} はよく使う言葉です。",
             "たとえば {r} は発音が簡単です。", "- {r}：{n}番目の単語",
             "「{r}」は基本的な単語です。")
TEACH_REQUESTS = {
    "zh": ("请教我一些常用的俄语单词。", "我想学俄语，请介绍几个基础词汇。",
           "How do I say these words in Russian? 请用中文解释。"),
    "ja": ("よく使うロシア語の単語を教えてください。",
           "ロシア語の基本的な言葉を紹介してください。")}


def teach_russian_spaced(seeds: int = 24) -> list[Case]:
    """Chinese and Japanese answers teaching Russian words, the words set off by spaces
    (as a model writes them), quotes or list marks."""
    out = []
    for lang, frames in (("zh", ZH_FRAMES), ("ja", JA_FRAMES)):
        for i, request in enumerate(TEACH_REQUESTS[lang]):
            for seed in range(seeds):
                rng = random.Random(f"teach/{lang}/{i}/{seed}")
                lines = [rng.choice(frames).format(r=rng.choice(RUSSIAN_TERMS), n=k + 1)
                         for k in range(rng.randint(4, 12))]
                sep = rng.choice(("", "\n", " "))
                out.append(Case(f"teach {lang} {i} {seed}", request, sep.join(lines)))
    return out


NBSP = ("\u00a0", "\u202f")
FRENCH_CLAUSES = ("le compte a été mis à niveau", "la facture sera envoyée demain",
                  "la résiliation prend effet à la fin du mois", "tout est en ordre",
                  "nous avons reçu votre demande", "merci pour votre aide",
                  "votre abonnement reste actif", "le service client vous rappellera",
                  "la mise à jour est terminée", "vos données sont en sécurité")


def french_spacing(seeds: int = 48) -> list[Case]:
    """French with no-break spaces (U+00A0, U+202F, mixed) inside guillemets « ... » and
    before ; : ! ? — how French typography sets them."""
    out = []
    for seed in range(seeds):
        rng = random.Random(f"french/{seed}")
        parts = []
        for _ in range(rng.randint(3, 8)):
            a, b = rng.sample(FRENCH_CLAUSES, 2)
            s1, s2 = rng.choice(NBSP), rng.choice(NBSP)
            form = rng.choice((
                "{A}{s}: {b}.", "{A}{s}; {b}.", "{A}{s}!", "{A}{s}?", "«{s}{A}{t}», dit-il.",
                "Il a écrit{s}: «{t}{A}{s}»{t}!", "{A}, «{s}{b}{t}»{s}?",
                "Attention{s}: {a}{t}; {b}{s}!"))
            parts.append(form.format(A=a[0].upper() + a[1:], a=a, b=b, s=s1, t=s2))
        text = " ".join(parts)
        request = rng.choice(("Pouvez-vous me répondre en français, s'il vous plaît ?",
                              f"Please answer in French. {QUESTION}",
                              "Que faut-il vérifier avant la mise à jour ?"))
        out.append(Case(f"french spacing {seed}", request, text))
    return out


FAMILIES: dict[str, Callable[[], tuple[list[Case], list[Case]]]] = {
    "unspaced": unspaced_family, "named": named_family, "code_switch": code_switch_family}
