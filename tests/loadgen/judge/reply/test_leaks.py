"""`token_leak` (judge.reply.leaks): markup that leaked, against markup talked about."""

from __future__ import annotations

import pytest

from loadgen.judge.reply.leaks import find_leak, markup_leak
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

CFG = VerdictConfig()
CONTENT = frozenset({"dsml", "tool", "special", "think"})
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
DSML_CALL = ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="change_plan">\n'
             '<｜DSML｜parameter name="account_id" string="true">XEHM4B</｜DSML｜parameter>\n'
             "</｜DSML｜invoke>\n</｜DSML｜function_calls>")


def rec(**kw) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", status=200, **kw)


TALKED_ABOUT = {
    "named as tags": "DeepSeek puts its reasoning between <think> and </think> tags.",
    "named as a token, mid-sentence": f"The tokenizer's BOS token is {BOS}, added once.",
    "named as a token, last in the text": f"The tokenizer's BOS token is {BOS}",
    "named as tags, first in the text": "<think> tags wrap the reasoning of DeepSeek models.",
    "a word in a sentence": "The model closes its reasoning with </think> and then answers.",
    "a word before punctuation": "Every ChatML message ends with <|im_end|>.",
    "in parentheses": "If the answer shows the close tag (</think>), enable the parser.",
    "inline code": "Each turn ends with `<|im_end|>` in ChatML.",
    "inline code, glued": "Strip `<think>hidden</think>` before showing the answer.",
    "code block": ("The template:\n\n```\n<|im_start|>user\nHi<|im_end|>\n"
                   "<|im_start|>assistant\n```\n\nThat is the whole layout."),
    "code block of DSML": f"A call looks like this:\n\n```\n{DSML_CALL}\n```\n",
    "double quotes": 'Search the logs for "</think>" to find unsplit replies.',
    "single quotes": "The parser splits at '</think>' and keeps both halves.",
    "curly quotes": "The parser splits at “</think>” and keeps both halves.",
    "DSML named in prose": ("DeepSeek-V4 writes a <｜DSML｜function_calls> block with one "
                            "<｜DSML｜invoke> element per call."),
    "Chinese, named": "DeepSeek 模型用</think>标签结束思考，然后给出答案。",
    "special tokens in a table of backticks": f"| token | meaning |\n|---|---|\n| `{BOS}` | BOS |",
    "a table of tokens": f"| token | meaning |\n|---|---|\n| {BOS} | starts a prompt |\n"
                         f"| {EOS} | ends a reply |",
    "a list of tokens": ("ChatML has two:\n- <|im_start|>: opens a message\n"
                         "- <|im_end|> - closes it\n1. </think> closes the reasoning"),
    "the subject of its line": ("Each message is framed.\n<|im_end|> marks its end, and "
                                "<|im_start|> opens the next."),
}
LEAKED = {
    "close tag at the end": ("Upgrading now.</think>", "</think>"),
    "think block at the start": ("<think>hidden</think> Done.", "<think>"),
    "EOS at the end": ("Done.<|im_end|>", "<|im_end|>"),
    "fullwidth EOS at the end": (f"Done.{EOS}", EOS),
    "BOS at the start": (f"{BOS}Done.", BOS),
    "BOS at the start, spaced": (f"{BOS} Done.", BOS),
    "close tag on its own line": ("I should upgrade first.\n</think>\n\nDone: upgraded.",
                                  "</think>"),
    "close tag after a sentence": ("I should upgrade first. </think> Done: upgraded.",
                                   "</think>"),
    "close tag before a new sentence": ("I will upgrade it </think> The account is upgraded.",
                                        "</think>"),
    "close tag opening a line of answer": ("I should upgrade first.\n</think> The account is "
                                           "upgraded.", "</think>"),
    "close tag alone on a list line": ("Steps:\n- </think>\n- done", "</think>"),
    "a run mid-text": (f"Done, {EOS}{EOS} and more.", EOS),
    "a run named": ("the token <|im_end|><|im_start|>assistant is next", "<|im_end|>"),
    "glued to a word": ("The account<|im_end|> is upgraded.", "<|im_end|>"),
    "DSML call": (DSML_CALL, "<｜DSML｜function_calls>"),
    "DSML call after text": ("Upgrading now.\n\n" + DSML_CALL, "<｜DSML｜function_calls>"),
    "DSML invoke named as an element, with its name": (
        'Call the <｜DSML｜invoke name="change_plan"> element now.',
        '<｜DSML｜invoke name="change_plan">'),
    "tool_call with JSON": ('<tool_call>{"name": "change_plan"}</tool_call>', "<tool_call>"),
    "tool_call with JSON mid-text": (
        'Sure. <tool_call> {"name": "change_plan", "arguments": {}} </tool_call> done',
        "<tool_call>"),
    "Chinese, glued to the answer": ("我需要先升级账户</think>好的，已升级。", "</think>"),
    "quoted text with a leak at the end": ('He said "fine".<|im_end|>', "<|im_end|>"),
}


@pytest.mark.parametrize("text", TALKED_ABOUT.values(), ids=TALKED_ABOUT.keys())
def test_markup_talked_about_is_not_a_leak(text: str) -> None:
    assert markup_leak(text, CONTENT) is None
    r = rec(finish_reason="stop", content=text, reasoning=f"They ask about it. {text}")
    assert classify(r, CFG) == ["ok"], r.findings


@pytest.mark.parametrize("text,token", LEAKED.values(), ids=LEAKED.keys())
def test_markup_that_leaked_is_a_leak(text: str, token: str) -> None:
    assert markup_leak(text, CONTENT) == token
    r = rec(finish_reason="stop", content=text)
    assert "token_leak" in classify(r, CFG)
    assert r.findings["leak"] == f"content: {token!r}"


@pytest.mark.parametrize("reasoning,token", [
    ("The user <｜begin▁of▁sentence｜>wants the upgrade.", BOS),
    (f"{BOS}{BOS}{BOS} The user wants", BOS),
    ("Let me think.</think>", "</think>"),
    ("Calling it now. " + DSML_CALL, "<｜DSML｜function_calls>"),
    ('Call it.<|tool_call_begin|>{"name": "change_plan"}', "<|tool_call_begin|>"),
])
def test_leaks_in_the_reasoning(reasoning: str, token: str) -> None:
    r = rec(finish_reason="stop", reasoning=reasoning, content="Done.")
    assert classify(r, CFG) == ["token_leak"]
    assert r.findings["leak"] == f"reasoning: {token!r}"


def test_a_reasoning_may_draft_a_plain_tool_call() -> None:
    r = rec(finish_reason="stop", content="Done.",
            reasoning='I will emit <tool_call>{"name": "change_plan"}</tool_call> next.')
    assert find_leak(r, CFG) is None


def test_configured_special_tokens_leak_wherever_they_appear() -> None:
    cfg = VerdictConfig(special_tokens=["[EOT]"])
    for where in ({"content": "Done. [EOT]"}, {"content": "The `[EOT]` marker."},
                  {"content": "Done.", "reasoning": "ok [EOT] ok"}):
        r = rec(finish_reason="stop", **where)
        assert classify(r, CFG) == ["ok"]
        assert classify(r, cfg) == ["token_leak"]
        assert r.findings["leak"] == "special token '[EOT]'"


def test_invisible_characters_do_not_shield_a_leak_at_the_edge() -> None:
    assert markup_leak("\u200b\ufeff<think>\nI will upgrade.", CONTENT) == "<think>"
    assert markup_leak("Done.<|im_end|>\u200b", CONTENT) == "<|im_end|>"
    assert markup_leak("Done. <|im_end|> \u2060\n", CONTENT) == "<|im_end|>"
