"""What a request is written in: identifiers of letters and digits are no language.

A tool call's arguments in a conversation (`{"account_id":"0UNJNX"}`) are a text of the
request like any other; before, lingua was asked about them, named some language at
no confidence (widening what a reply may be written in), and its first answer loaded
every language's model: a third of a second of every short run."""

from __future__ import annotations

import json
import random
import string

import pytest

from loadgen.judge.text import language

PROSE = {
    "en": "Please check the balance of my account and tell me what the plan costs.",
    "fr": "Pouvez-vous vérifier le solde de mon compte et me dire ce que coûte le forfait ?",
    "de": "Können Sie bitte den Kontostand prüfen und mir sagen, was der Tarif kostet?",
    "ru": "Проверьте, пожалуйста, баланс моего счёта и скажите, сколько стоит тариф.",
}


def _identifier(rng: random.Random) -> str:
    """Letters and digits, at least one of each, in any case: a code, a plan id, `v2`."""
    length = rng.randint(2, 12)
    chars = [rng.choice(string.ascii_letters + string.digits) for _ in range(length)]
    chars[rng.randrange(length)] = rng.choice(string.digits)
    letter_at = rng.choice([i for i in range(length) if not chars[i].isdigit()] or [0])
    chars[letter_at] = rng.choice(string.ascii_letters)
    return "".join(chars)


def _arguments(rng: random.Random) -> tuple[str, str]:
    """(a tool call's arguments, the same keys with empty values)."""
    keys = rng.sample(["account_id", "plan_id", "ticket", "ref", "code", "order"], 2)
    return (json.dumps({k: _identifier(rng) for k in keys}),
            json.dumps(dict.fromkeys(keys, "")))


@pytest.mark.parametrize("seed", range(40))
def test_identifiers_add_no_language_to_a_request(seed: int) -> None:
    """A request says what its prose and its arguments' keys say, whatever its
    arguments' values are."""
    rng = random.Random(seed)
    langs = rng.sample(sorted(PROSE), rng.randint(1, 2))
    texts = [PROSE[lang] for lang in langs]
    calls = [_arguments(rng) for _ in range(rng.randint(1, 3))]
    assert language.languages_of_request(texts + [c for c, _ in calls]) \
        == language.languages_of_request(texts + [keys for _, keys in calls])
    codes = " ".join(_identifier(rng) for _ in range(rng.randint(1, 6)))
    assert language.languages_of_request([codes]) == []


def test_a_tool_calls_arguments_are_read_by_their_keys_without_the_detector(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_detector() -> None:
        raise AssertionError("lingua was asked about identifiers")

    monkeypatch.setattr(language, "detector", no_detector)
    assert language.languages_of_request(['{"account_id":"0UNJNX"}',
                                          '{"plan_id":"P7QX2B"}']) == ["en"]


def test_words_beside_identifiers_are_still_read() -> None:
    text = PROSE["ru"] + " Номер счёта 0UNJNX, тариф P7QX2B."
    assert language.languages_of_request([text]) == language.languages_of_request(
        [PROSE["ru"]])
