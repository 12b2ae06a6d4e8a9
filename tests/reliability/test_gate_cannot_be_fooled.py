"""Trying to make a broken server pass a candidate gate, through `dsv4-qual run`.

Every broken tool-turn shape fails the gate (exit 1); the legitimate corpus passes it
(exit 0); a candidate whose receipts show `packed`, whose model processes wrote no
receipt or whose builder was never reached never exits 0; a run too small to prove its
rate is invalid.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_cli
from tests.support.family_sizes import SIZES
from tests.support.legit_corpus import grown_corpus, sample_by_family, write_replay
from tests.support.openai_fake import MODE_VERDICTS
from tests.support.receipts import parallel
from tests.support.scenario_files import write_scenario

TOOL_TURNS = {"load": {"first_token_timeout_s": 10}, "request": {"max_tokens": 96},
              "gate": {"prove_below": 0.5}}

BROKEN_SHAPES = ["answer", "args_loop", "bad_args", "unknown_tool", "missing_keys", "abort"]


def run(tmp_path: Path, srv_url: str, *, measurement: int = 8, gate: dict | None = None,
        scenario: dict | None = None, extra: tuple[str, ...] = ()) -> tuple[int, dict, str]:
    layers = [scenario] if scenario else [TOOL_TURNS, {"load": {"measurement": measurement},
                                                         "gate": gate or {}}]
    sc = write_scenario(tmp_path / "s.toml", *layers)
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv_url, "--out", str(out), "--quiet", *extra)
    summary = json.loads((out / "summary.json").read_text()) if out.exists() else {}
    return proc.returncode, summary, proc.stdout + proc.stderr


@pytest.mark.parametrize("mode", BROKEN_SHAPES)
def test_every_broken_tool_turn_fails_the_gate(fake_server, tmp_path: Path, mode: str) -> None:
    _, srv = fake_server((mode,))
    code, summary, output = run(tmp_path, srv.url)
    assert code == 1, output
    verdicts = summary["phases"]["measurement"]["verdicts"]
    assert verdicts.get(MODE_VERDICTS[mode]) == 8, verdicts
    assert summary["gate"]["failures"] == 8


@pytest.mark.parametrize("step", SIZES)
def test_the_grown_legitimate_corpus_passes_the_gate(fake_server, tmp_path: Path,
                                                     step: int) -> None:
    # Replayed bodies: each names the reply the fake streams (layout kept) and offers what
    # it needs; a sample of every family, with the default gate (every gated verdict).
    # The fast tier serves two members a family, the long tier six.
    per_family = 6 if step == 1 else 2
    replies = sample_by_family(grown_corpus(members=20), per_family=per_family)
    write_replay(tmp_path / "corpus.jsonl", replies, "corpus")
    _, srv = fake_server()
    scenario = {"load": {"measurement": len(replies)}, "request": {"max_tokens": 4096},
                "workload": {"kind": "replay", "path": "corpus.jsonl"},
                "gate": {"prove_below": 0.2}}
    code, summary, output = run(tmp_path, srv.url, scenario=scenario)
    assert code == 0, (output, summary["phases"]["measurement"]["verdicts"])
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": len(replies)}
    assert len(replies) > 25 * per_family


# --------------------------------------------------------------------------- receipts


def model_receipt(pid: int, layout: str, *, calls: int = 40, c128a: int = 1,
                  runs_model: bool = True, time: float | None = None) -> dict:
    return {"pid": pid, "process": "VLLM::Worker" if runs_model else "vllm serve",
            "layout": layout, "patched": layout != "off", "upstream_variant": "capacity",
            "vllm_version": "0.28.0",
            "guard": {"mode": "1", "calls": calls if runs_model else 0, "violations": 0},
            "model": {"loaded": runs_model, "architectures": ["DeepseekV4ForCausalLM"],
                      "c128a_builders": c128a if runs_model else 0, "parallel": parallel(),
                      "hooks": {"model_loader": "ok", "c128a_builders": "ok"}}}


def unwatched_builders(pid: int) -> dict:
    """A release whose builder class the model watch cannot find: nothing counted, nothing
    called, which a model without C128A layers would also show."""
    data = model_receipt(pid, "capacity", calls=0, c128a=0)
    data["model"]["hooks"]["c128a_builders"] = "no class in m defines _build_c128a_metadata"
    return data


@pytest.mark.parametrize("receipts,code,words", [
    ([model_receipt(1, "capacity", runs_model=False), unwatched_builders(2)], 2,
     "the model watch could not count C128A builders"),
    ([model_receipt(1, "capacity", runs_model=False), model_receipt(2, "packed")], 1,
     "packed C128A layout"),
    ([model_receipt(1, "capacity", runs_model=False)], 2,
     "no receipt from a process that runs the model"),
    ([model_receipt(2, "capacity", calls=0)], 2, "the C128A builder was not reached"),
    ([], 2, "no patch receipt found"),
    ([model_receipt(1, "capacity", runs_model=False), model_receipt(2, "capacity")], 0,
     "1 model process(es) ran capacity"),
])
def test_receipts_decide_a_clean_candidate(fake_server, tmp_path: Path, receipts, code, words):
    fake, srv = fake_server(("ok",))
    directory = tmp_path / "receipts"
    directory.mkdir()
    for receipt in receipts:
        receipt["server"] = {"id": fake.server_id}  # written by the current server start
        (directory / f"host-{receipt['pid']}.json").write_text(json.dumps(receipt))
    result, summary, output = run(tmp_path, srv.url, gate={"require_receipts": True},
                                  extra=("--receipts-dir", str(directory)))
    assert result == code, output
    (check,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("patch receipts")]
    assert words in check["message"]
    assert (words in output) == (code != 0)  # a failing check is the run's stated reason
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 8}  # every reply was clean


def test_a_packed_sim_answering_every_request_still_fails(tmp_path: Path) -> None:
    # One request at a time: packed misplaces no row, every reply is right; the receipt
    # still says what ran, and packed never passes as a candidate.
    sc = write_scenario(tmp_path / "p.toml",
                        target={"sim": {"layout": "packed", "max_model_len": 1024}},
                        load={"concurrency": 1, "measurement": 6}, request={"max_tokens": 160},
                        workload={"kind": "long-context", "context_tokens": [96, 256]},
                        gate={"prove_below": 0.5})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 6}
    assert proc.returncode == 1 and "packed C128A layout" in proc.stdout


def test_too_few_requests_to_prove_the_rate_is_bad_input(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    sc = write_scenario(tmp_path / "s.toml", TOOL_TURNS, gate={"prove_below": 0.05})
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o"))
    assert proc.returncode == 3
    assert "a candidate needs at least 59 measured requests" in proc.stderr
    assert not (tmp_path / "o").exists()
