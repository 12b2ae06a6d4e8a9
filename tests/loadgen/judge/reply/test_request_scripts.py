"""The scripts a request gives reason for (judge.text.scripts), from messages of every shape a
chat request takes, and the script table on characters at its edges.

A request's scripts go on its record (`params["scripts"]`) and explain the same scripts
in its reply to the `garbled` rule: a script missed here is a Russian or Korean reply
flagged as salad; a message shape that crashes here stops the run.
"""

from __future__ import annotations

from typing import Any

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.judge.text.scripts import message_texts, request_scripts, text_scripts
from loadgen.scenario import VerdictConfig

RUSSIAN = "Переведи тариф на business."
KOREAN = "요금제를 바꿔 주세요."


def test_every_message_after_one_that_is_not_an_object_counts() -> None:
    assert request_scripts(["not a message", {"role": "user", "content": RUSSIAN}]) \
        == ["Cyrillic"]


def test_text_parts_add_to_what_earlier_messages_said() -> None:
    messages = [{"role": "system", "content": RUSSIAN},
                {"role": "user", "content": [{"type": "text", "text": KOREAN}]}]
    assert request_scripts(messages) == ["Cyrillic", "Hangul"]
    assert message_texts(messages) == [RUSSIAN, KOREAN]


def test_parts_without_text_are_skipped() -> None:
    # An image beside the text, and parts of shapes no server takes: the text parts
    # still count, the others are no text.
    content: list[Any] = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,"}},
                          "a bare string", {"type": "text", "text": None},
                          {"type": "text", "text": KOREAN}]
    assert request_scripts([{"role": "user", "content": content}]) == ["Hangul"]


def test_tool_calls_of_every_shape_give_only_their_argument_strings() -> None:
    calls: list[Any] = ["not a call", {"function": "x"},
                        {"function": {"name": "x", "arguments": {"q": "Привет"}}},
                        {"function": {"name": "x", "arguments": '{"q": "안녕"}'}}]
    messages = [{"role": "assistant", "content": None, "tool_calls": calls}]
    assert message_texts(messages) == ['{"q": "안녕"}']
    assert request_scripts(messages) == ["Hangul"]


def test_the_scripts_of_an_ascii_text() -> None:
    assert text_scripts("Upgrade XEHM4B, please.") == {"Latin"}
    assert text_scripts("1234 + 5678 = 6912; [42]") == set()


def test_characters_past_the_script_table_are_no_letters() -> None:
    # The flag of England is a black flag and tag characters (U+E0067...), far past the
    # table's planes: symbols, like the flag itself. A Russian list of English clubs,
    # a flag before each, has no switch of scripts; salad beside a flag is still salad.
    england = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    clubs = ", ".join(f"{england} {club}" for club in
                      ("Арсенал", "Челси", "Ливерпуль", "Тоттенхэм", "Эвертон"))
    assert garble_in_text(f"Клубы Англии: {clubs}.", frozenset(), VerdictConfig()) is None
    found = garble_in_text("ан的ан的ан" + england, frozenset(), VerdictConfig())
    assert found is not None and found[0] == "scripts"


def test_a_lone_surrogate_is_a_character_not_a_crash() -> None:
    # Half of a UTF-16 pair, as a server that splits an emoji may send it: no letter,
    # neither in prose nor in salad.
    prose = "Der Sieger \ud83c kam aus Manchester, die Zweite aus Leeds. " * 4
    assert garble_in_text(prose, frozenset(), VerdictConfig()) is None
    found = garble_in_text("ан的ан的ан\ud83c", frozenset(), VerdictConfig())
    assert found is not None and found[0] == "scripts"
