"""The `markers` detector of `garbled`, pinned where its rule has edges: which markers a
burst needs (four in 160 characters, one of them repeated), the window sliding past
markers long before a burst, ASCII special tokens, and the finding a person reads (the
count, the kinds, the excerpt)."""

from __future__ import annotations

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

BOS = "<｜begin▁of▁sentence｜>"
PROSE = "The user wants the account moved to the business plan at the end of the term. "


def judge(text: str, **cfg: object) -> tuple[str, str, str] | None:
    return garble_in_text(text, frozenset(), VerdictConfig(**cfg))  # type: ignore[arg-type]


def at(offsets: list[int], marker: str) -> str:
    """`marker` starting at each offset, dots between."""
    text = ""
    for offset in offsets:
        text += "." * (offset - len(text)) + marker
    return text


def test_a_burst_of_ascii_special_tokens_is_garbled_and_three_are_not() -> None:
    # Special tokens of other tokenizers (`<|endoftext|>`) in a reply of plain ASCII.
    eot = "<|endoftext|>"
    assert judge(PROSE + eot * 4 + PROSE)[0] == "markers"
    assert judge(PROSE + eot * 3 + PROSE) is None
    assert judge("Привет. " + PROSE + eot * 4)[0] == "markers"  # and beside other scripts


def test_a_burst_long_after_lone_markers_is_found() -> None:
    # Lone replacement characters early in the reply, far apart, then four in a row:
    # the window slides past the early ones to the burst.
    text = at([0, 300, 600, 610, 620, 630], "\ufffd") + " " + PROSE
    kind, detail, excerpt = judge(text)
    assert kind == "markers"
    assert detail == "4 markers within 160 chars (threshold 4): replacement x4"
    assert excerpt == "\ufffd" + "." * 9 + "\ufffd" + "." * 9 + "\ufffd" + "." * 9 + "\ufffd"


def test_one_kind_repeated_makes_a_burst_and_four_kinds_once_each_do_not() -> None:
    # Four different markers side by side are rarer in salad than one repeated, and
    # honest text that discusses encodings names each once.
    assert judge(PROSE + "a\ufffdb\ufffdcÃ©d\x01e " + PROSE)[0] == "markers"
    assert judge(PROSE + "a\ufffdbÃ©c\x01d<0x0A>e " + PROSE) is None


def test_a_chat_template_spelled_out_once_is_a_leak_not_salad() -> None:
    # Four different special tokens against each other: token_leak's, each named once.
    template = f"{BOS}<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>"
    assert judge(PROSE + template + " " + PROSE) is None
    record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                           endpoint="http://x", item_id="i", finish_reason="stop",
                           reasoning=PROSE, content=PROSE + template)
    verdicts = classify(record, VerdictConfig())
    assert "token_leak" in verdicts and "garbled" not in verdicts


def test_a_token_talked_about_does_not_end_the_search() -> None:
    # One token named in a sentence, then salad with a BOS burst later in the reply.
    text = f"The model starts every prompt with `{BOS}`. " + PROSE + BOS * 4
    kind, detail, _ = judge(text)
    assert kind == "markers" and detail.endswith(f": {BOS} x4")


def test_the_finding_names_the_four_commonest_markers() -> None:
    # Five kinds in the burst, the special token twice: the four commonest, the most
    # common first, the others in the order they came.
    text = PROSE + "<|eot|>a\ufffdbÃ©c\x01d<0x0A>e<|eot|> " + PROSE
    kind, detail, excerpt = judge(text)
    assert kind == "markers"
    assert detail == ("6 markers within 160 chars (threshold 4): <|eot|> x2, replacement x1, "
                      "mojibake x1, control x1")
    assert excerpt == "<|eot|>a\ufffdbÃ©c\x01d<0x0A>e<"
