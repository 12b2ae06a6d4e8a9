"""The served model's own special tokens, read from its tokenizer files
(`verdicts.tokenizer`), are leaks the catalogue of chat-template markers cannot know.

Generated families: tokenizers of both file formats declaring tokens of shapes no
catalogue holds, each token placed in an answer about billing (in a sentence with
spaces around it, at an end, glued to a word): a leak everywhere outside code; in an
answer about the tokenizer, named as a token or in code: not a leak.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.reply.leaks import find_leak
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.tokenizer_files import declared_by_server, special_tokens
from tests.loadgen.conftest import run_cli
from tests.loadgen.judge.reply.test_judge_families import PROSE, serve
from tests.support.broken_servers import _answer, _facts
from tests.support.scenario_files import write_scenario

#: Shapes of special tokens outside every catalogue: brackets, guillemets, bars, words.
SHAPES = ("[[{w}]]", "<{w}>", "<<{w}>>", "⟨{w}⟩", "[{W}]", "{{{{{w}}}}}", "<!{w}!>",
          "@@{W}@@", "«{w}»", "<{w}/>")
WORDS = ("eot", "end_msg", "turn_end", "sep", "eom", "stop_here", "endofreply", "assist")


def token(rng: random.Random) -> str:
    word = rng.choice(WORDS)
    return rng.choice(SHAPES).format(w=word, W=word.upper())


def tokenizer_dir(tmp: Path, tokens: list[str], form: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    if form == "tokenizer.json":
        doc: dict[str, Any] = {"added_tokens": [
            {"id": i, "content": t, "special": True} for i, t in enumerate(tokens)]
            + [{"id": 99, "content": "hello", "special": False}]}
    else:
        doc = {"added_tokens_decoder": {str(i): {"content": t, "special": True}
                                        for i, t in enumerate(tokens[1:])},
               "eos_token": {"content": tokens[0]}, "bos_token": None}
    (tmp / form).write_text(json.dumps(doc), encoding="utf-8")
    return tmp


def record(content: str, *, about_markup: bool) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", finish_reason="stop",
                         reasoning="Answer the billing question.", content=content,
                         params={"about_markup": about_markup, "asks_dialogue": False})


PLACES = {
    "in a sentence": "Your invoice is paid. A {t} few notes on the renewal follow.",
    "at the end": "Your invoice is paid and the renewal is set.{t}",
    "glued": "Your invoice is{t}paid and the renewal is set.",
    "own line": "Your invoice is paid.\n{t}\nThe renewal is set.",
}


@pytest.mark.parametrize("form", ["tokenizer.json", "tokenizer_config.json"])
def test_every_declared_token_is_a_leak_in_an_answer_not_about_markup(tmp_path: Path,
                                                                     form: str) -> None:
    missed, seen = [], 0
    for seed in range(60):
        rng = random.Random(f"{form}/{seed}")
        tokens = list(dict.fromkeys(token(rng) for _ in range(4)))
        cfg = VerdictConfig(tokenizer=str(tokenizer_dir(tmp_path / str(seed), tokens, form)))
        assert set(tokens) <= set(cfg.served_tokens)
        for t in tokens:
            for place, text in PLACES.items():
                seen += 1
                if find_leak(record(text.format(t=t), about_markup=False), cfg) is None:
                    missed.append((t, place))
                # ...which the catalogue alone does not know.
                assert find_leak(record(text.format(t=t), about_markup=False),
                                 VerdictConfig()) is None or t.startswith("<")
    assert missed == [], f"{len(missed)} of {seen} missed"


TALKED = ("The tokenizer ends each reply with `{t}`, which the server strips.",
          "The {t} token marks the end of a turn.",
          "Its end-of-message marker is \"{t}\".",
          "```\nhello{t}\n```\nThat is how a raw completion looks.")


def test_tokens_talked_about_in_an_answer_about_the_tokenizer_are_not_leaks(
        tmp_path: Path) -> None:
    alarms = []
    for seed in range(60):
        rng = random.Random(f"talked/{seed}")
        t = token(rng)
        cfg = VerdictConfig(tokenizer=str(tokenizer_dir(tmp_path / str(seed), [t],
                                                        "tokenizer.json")))
        for text in TALKED:
            if (leak := find_leak(record(text.format(t=t), about_markup=True), cfg)):
                alarms.append(leak)
        # In code, even an answer about billing may show it.
        if find_leak(record(f"Run `grep '{t}' log.txt` to check.", about_markup=False), cfg):
            alarms.append(t)
    assert alarms == []


def test_words_a_tokenizer_marks_special_are_not_leaks(tmp_path: Path) -> None:
    path = tokenizer_dir(tmp_path, ["[[EOT]]"], "tokenizer.json")
    doc = json.loads((path / "tokenizer.json").read_text())
    doc["added_tokens"] += [{"id": 7, "content": w, "special": True}
                            for w in ("user", "assistant", "ok", " ")]
    (path / "tokenizer.json").write_text(json.dumps(doc))
    assert special_tokens(path) == ("[[EOT]]",)


@pytest.mark.parametrize("write,why", [
    (None, "does not exist"),
    ("dir", "holds no tokenizer.json or tokenizer_config.json"),
    ("{not json", "is not a tokenizer file"),
    ("[1, 2]", "is not a tokenizer file: not a JSON object"),
])
def test_a_tokenizer_path_that_cannot_be_read_is_bad_input(tmp_path: Path, write: str | None,
                                                           why: str) -> None:
    target = tmp_path / "tok"
    if write == "dir":
        target.mkdir()
    elif write is not None:
        target = tmp_path / "tokenizer.json"
        target.write_text(write)
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'name = "t"\n[verdicts]\ntokenizer = "{target}"\n')
    proc = run_cli("validate", str(scenario))
    assert proc.returncode == 3
    (line,) = proc.stderr.strip().splitlines()
    assert why in line and "Traceback" not in proc.stderr


@pytest.mark.parametrize("declared", [True, False])
def test_served_a_model_leaking_its_own_token(fake_server, tmp_path: Path,
                                              declared: bool) -> None:
    leaked = "[[END_MSG]]"

    def script(body: dict[str, Any], fake: Any) -> dict[str, Any]:
        return _answer(body, f"{_facts(body)} A {leaked} few notes follow on the renewal.")

    verdicts = {"verdicts": {"tokenizer": str(tokenizer_dir(tmp_path / "tok", [leaked],
                                                            "tokenizer.json"))}}
    code, summary = serve(fake_server, tmp_path, script, PROSE,
                          *([verdicts] if declared else []))
    counts = summary["phases"]["measurement"]["verdicts"]
    if declared:
        assert code == 1 and counts.get("token_leak", 0) == 12, counts
    else:  # the catalogue cannot know this model's token: why the files are read
        assert counts.get("token_leak", 0) == 0, counts


# -- read from the server: GET /tokenizer_info, vLLM's description of its tokenizer ------

#: Added tokens a tokenizer may hold that are not special: vLLM's description writes every
#: added token as bare text, so these must not be read as special.
PLAIN_ADDED = ("hello", "<tool_call>", "</think>", "##ing", "[[note]]", "<ref>")


def server_doc(rng: random.Random, tokens: list[str]) -> dict[str, Any]:
    """A description in vLLM's form: tokenizer_config.json's keys, each added token as its
    bare text (the `special` flag lost), the named ones as strings."""
    delimited = [f"<|{w}_{rng.randrange(100)}|>" for w in rng.sample(WORDS, 2)]
    added = [*tokens, *delimited, *rng.sample(PLAIN_ADDED, 3)]
    rng.shuffle(added)
    return {"tokenizer_class": "PreTrainedTokenizerFast",
            "eos_token": tokens[0], "bos_token": None, "pad_token": tokens[0],
            "additional_special_tokens": tokens[1:],
            "added_tokens_decoder": {str(1000 + i): t for i, t in enumerate(added)},
            "model_max_length": 65536}


def test_a_servers_description_gives_its_declared_and_delimited_tokens() -> None:
    wrong = []
    for seed in range(200):
        rng = random.Random(f"server-doc/{seed}")
        tokens = list(dict.fromkeys(token(rng) for _ in range(rng.randint(1, 4))))
        doc = server_doc(rng, tokens)
        delimited = {t for t in doc["added_tokens_decoder"].values() if t.startswith("<|")}
        got = set(declared_by_server(doc))
        if got != set(tokens) | delimited:
            wrong.append((seed, sorted(got ^ (set(tokens) | delimited))))
    assert wrong == []


@pytest.mark.parametrize("answer", [
    None,  # no endpoint: 404, as vLLM without --enable-tokenizer-info-endpoint
    {"detail": "internal error"},  # a JSON answer that describes no tokenizer
    "plain text",
])
def test_a_server_that_describes_no_tokenizer_leaves_the_judge_as_it_was(
        fake_server, tmp_path: Path, answer: object) -> None:
    fake, srv = fake_server(("scripted",))
    fake.script = lambda body, f: _answer(body, f"{_facts(body)} The renewal is set.")
    if answer is not None:
        fake.tokenizer_doc = answer  # type: ignore[assignment]
    out = tmp_path / "out"
    sc = write_scenario(tmp_path / "s.toml", PROSE)
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    run = json.loads((out / "run.json").read_text())["run"]
    assert proc.returncode == 0, proc.stderr
    assert run["server_special_tokens"] is None


@pytest.mark.parametrize("workers", [1, 2])
def test_served_a_model_leaking_a_token_only_its_server_declares(
        fake_server, tmp_path: Path, workers: int) -> None:
    rng = random.Random(f"served/{workers}")
    tokens = ["[[END_MSG]]", "@@EOM@@"]
    fake, srv = fake_server(("scripted",))
    fake.tokenizer_doc = server_doc(rng, tokens)
    leaked = iter(itertools.cycle(tokens))

    def script(body: dict[str, Any], f: Any) -> dict[str, Any]:
        return _answer(body, f"{_facts(body)} A {next(leaked)} few notes follow on the renewal.")

    fake.script = script
    out = tmp_path / "out"
    sc = write_scenario(tmp_path / "s.toml", PROSE)
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet",
                   "--workers", str(workers))
    summary = json.loads((out / "summary.json").read_text())
    counts = summary["phases"]["measurement"]["verdicts"]
    assert proc.returncode == 1 and counts.get("token_leak", 0) == 12, counts
    run = json.loads((out / "run.json").read_text())["run"]
    assert set(tokens) <= set(run["server_special_tokens"])
