"""The engine's mechanism, without HTTP: what each layout makes every row read."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from server_patch.c128a import builder
from server_patch.sim.config import FULL, FULL_AND_PIECEWISE, GRAPH_MODES, SimConfig
from server_patch.sim.engine import Engine, SimRequest
from server_patch.sim.faces import Face
from server_patch.sim.facts import find_codes
from server_patch.sim.metrics import render_metrics
from server_patch.sim.model import Reply, make_script
from server_patch.sim.salad import BOS, token_salad
from tests.sim.drive import MIXED_BILLING, TOOLS, billing_messages, drive

MESSAGES = [{"role": "user", "content": "Please upgrade XEHM4B to business, then cancel it."}]


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
@pytest.mark.parametrize("layout", ["capacity", "prefix"])
@pytest.mark.parametrize("seed", [0, 1])
def test_capacity_and_prefix_never_misread(layout: str, seed: int, graph_mode: str) -> None:
    st = drive(layout, concurrency=12, requests=40, seed=seed, graph_mode=graph_mode).stats
    assert st.finished_requests == 40
    assert st.misread_rows == 0 and st.corrupted_requests == 0
    assert st.foreign_rows == 0 and st.missing_rows == 0
    assert st.pure_decode_steps > 50  # the frozen consumer really was exercised
    # Starts and finishes interleave: prefills join running decodes, in both modes.
    assert st.mixed_steps > 5


@pytest.mark.parametrize("seed", [0, 1])
def test_packed_misreads_rows_after_the_first(seed: int) -> None:
    st = drive("packed", concurrency=12, requests=40, seed=seed).stats
    assert st.corrupted_requests > 0 and st.misread_rows > 0
    assert st.first_corruption_step is not None


def test_seeds_give_different_runs() -> None:
    runs = [drive("capacity", concurrency=12, requests=40, seed=seed) for seed in (0, 1)]
    assert runs[0].stats.prompt_tokens != runs[1].stats.prompt_tokens
    assert [r.reply.max_tokens for r in runs[0].requests] != \
        [r.reply.max_tokens for r in runs[1].requests]
    again = drive("capacity", concurrency=12, requests=40, seed=0)
    assert again.stats == runs[0].stats  # and one seed, one run: nothing else varies


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
@pytest.mark.parametrize("layout", ["packed", "capacity", "prefix"])
def test_a_single_stream_never_misreads_a_decode_row(layout: str, graph_mode: str) -> None:
    st = drive(layout, concurrency=1, requests=6, graph_mode=graph_mode).stats
    assert st.misread_rows == st.misread_prefill_rows  # one decode row cannot be misplaced
    assert st.corrupted_requests == 0
    # A prompt's many prefill rows can: a FULL graph reads packed ones at the capture
    # stride (the request's own indices, misplaced: missing context, nothing foreign).
    assert (st.misread_prefill_rows > 0) is (layout == "packed" and graph_mode == FULL)


# -- graph modes ------------------------------------------------------------------------


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
def test_which_steps_replay_the_captured_consumers(graph_mode: str) -> None:
    st = drive("capacity", concurrency=12, requests=40, graph_mode=graph_mode).stats
    assert st.mixed_steps > 0
    if graph_mode == FULL:
        assert st.replayed_steps == st.steps  # mixed steps captured too (0.28+ ALWAYS)
    else:
        assert st.replayed_steps == st.pure_decode_steps  # mixed steps run piecewise


@pytest.mark.long
def test_packed_prefill_rows_are_misread_only_when_mixed_steps_replay() -> None:
    piecewise = drive("packed", concurrency=12, requests=40, graph_mode=FULL_AND_PIECEWISE)
    full = drive("packed", concurrency=12, requests=40, graph_mode=FULL)
    # Piecewise prefills read the packed views the builder returned: right rows.
    assert piecewise.stats.misread_prefill_rows == 0
    # A FULL graph reads them at the capture stride: packed rows are misplaced.
    assert full.stats.misread_prefill_rows > 0


# -- every row checked: prefill too -----------------------------------------------------


def prefill_corrupting(layout: str, corrupt: str):
    """The `layout` builder, but every prefill row it writes is then corrupted."""
    build = builder(layout)

    def build_c128a_topk_metadata(*args, **kwargs):
        decode, lens, prefill = build(*args, **kwargs)
        if prefill.shape[0] > 1:
            if corrupt == "shifted":  # each token gets the row of the token before it
                prefill[1:] = prefill[:-1].clone()
            else:  # indices past what the request has written: stale slots, or none
                prefill.copy_(torch.where(prefill >= 0, prefill + 1000, prefill))
        return decode, lens, prefill

    return build_c128a_topk_metadata


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
@pytest.mark.parametrize("corrupt", ["shifted", "past-the-end"])
def test_a_capacity_builder_that_corrupts_only_prefill_rows_is_caught(
        graph_mode: str, corrupt: str) -> None:
    run = drive("capacity", concurrency=12, requests=40, graph_mode=graph_mode,
                build=prefill_corrupting("capacity", corrupt))
    st = run.stats
    assert st.misread_prefill_rows > 0
    assert st.misread_rows == st.misread_prefill_rows  # decode rows were left right
    assert st.missing_rows > 0  # the rows found nothing where their context should be


# -- what a wrong read finds decides the model's fate -----------------------------------


def test_missing_context_is_not_fatal_foreign_context_is() -> None:
    """Prefill rows pointed past their request's blocks find nothing: many misreads,
    no request lost. Decode rows swapped between requests read each other's
    KV: lost."""
    missing = drive("capacity", concurrency=12, requests=24,
                    build=prefill_corrupting("capacity", "past-the-end")).stats
    assert missing.misread_rows > 0 and missing.foreign_rows == 0
    assert missing.corrupted_requests == 0

    build = builder("capacity")

    def swapped_decode_rows(*args, **kwargs):
        decode, lens, prefill = build(*args, **kwargs)
        if decode.shape[0] > 1:
            decode[[0, 1]] = decode[[1, 0]].clone()
            lens[[0, 1]] = lens[[1, 0]].clone()
        return decode, lens, prefill

    foreign = drive("capacity", concurrency=12, requests=24, build=swapped_decode_rows).stats
    assert foreign.foreign_rows > 0 and foreign.corrupted_requests > 0


@pytest.mark.parametrize("threshold,lost", [(1.0, False), (0.0, True)])
def test_the_fatal_foreign_share_decides_the_fate(threshold: float, lost: bool) -> None:
    run = drive("packed", concurrency=12, requests=40, fatal_foreign_share=threshold)
    assert run.stats.foreign_rows > 0  # the same reads...
    assert (run.stats.corrupted_requests > 0) is lost  # ...a different fate


@pytest.mark.long
def test_fate_is_monotone_in_the_threshold() -> None:
    lost = [drive("packed", concurrency=12, requests=40, fatal_foreign_share=t)
            .stats.corrupted_requests for t in (0.0, 0.5, 0.9)]
    assert lost[0] >= lost[1] >= lost[2]


# -- start-up state ---------------------------------------------------------------------


def test_buffers_start_as_fresh_memory_then_capture_writes_them() -> None:
    cfg = SimConfig(max_num_seqs=4, max_model_len=1024, graph_mode=FULL)
    graphs = Engine(cfg).graphs
    # vLLM allocates with torch.empty: nothing is written before capture.
    assert int(graphs.decode_buffer[cfg.max_num_seqs:].abs().sum()) == 0
    # Capture's dummy rows point into the null block (slots below one block's entries)...
    captured = graphs.decode_buffer[: cfg.max_num_seqs]
    assert int(captured.max()) < cfg.compressed_per_block
    # ...and the full mode's prefill capture wrote local indices 0..capacity-1.
    assert graphs.prefill_buffer[0].tolist() == list(range(cfg.capacity))


def test_blocks_are_recycled_last_freed_first() -> None:
    engine = drive("capacity", concurrency=4, requests=8).engine
    pool = engine.pool
    assert pool.usage == 0.0  # every finished request gave its blocks back
    first: list[int] = []
    pool.allocate(first, engine.cfg.kv_block_size * 2)
    held = list(first)
    pool.release(first)
    again: list[int] = []
    pool.allocate(again, engine.cfg.kv_block_size * 2)
    assert again == [held[1], held[0]]  # stale blocks come back first, as in vLLM


def test_reply_is_deterministic_from_the_request() -> None:
    a = make_script(MESSAGES, None)
    b = make_script(MESSAGES, None)
    assert a == b
    other = make_script([{"role": "user", "content": "Something else entirely."}], None)
    assert other.reasoning != a.reasoning


def test_active_width_and_capacity_follow_vllm_arithmetic() -> None:
    cfg = SimConfig(max_model_len=4096, compress_ratio=16, alignment=16)
    assert cfg.capacity == 256
    assert cfg.active_width(4096) == 256
    assert cfg.active_width(300) == 32  # next_pow2(300 // 16 = 18)
    assert cfg.active_width(10) == 16  # the alignment floor


@pytest.mark.parametrize("bad", [{"graph_mode": "piecewise"}, {"fatal_foreign_share": 1.5}])
def test_config_refuses_unknown_settings(bad: dict) -> None:
    with pytest.raises(ValueError):
        SimConfig(**bad)


# -- the quiet faces: what a read of another request's KV makes a reply write -----------


def reading_another(fraction: float):
    """The capacity builder, but decode row 1 reads `fraction` of its length from the
    slots of row 0 (another running request's entries), the rest its own."""
    build = builder("capacity")

    def build_c128a_topk_metadata(*args, **kwargs):
        decode, lens, prefill = build(*args, **kwargs)
        if decode.shape[0] >= 2:
            k = round(fraction * int(lens[1]))
            decode[1, :k] = decode[0, :k].clone()
        return decode, lens, prefill

    return build_c128a_topk_metadata


def serve(engine: Engine, *requests: tuple[int, list, list | None, int]) -> list[SimRequest]:
    """Admit (prompt tokens, messages, tools, max_tokens) requests together; run dry."""
    sent = [engine.new_request(prompt, Reply(make_script(messages, tools), max_tokens))
            for prompt, messages, tools, max_tokens in requests]
    for r in sent:
        engine.add(r)
    while engine.has_work():
        engine.step()
    return sent


def written(r: SimRequest) -> dict[str, str]:
    """What the request's reply wrote, by channel."""
    out: dict[str, str] = {}
    while not r.queue.empty():
        piece = r.queue.get_nowait()
        if piece is not None:
            out[piece.channel] = out.get(piece.channel, "") + piece.text
    return out


MOVE = "Move the account whose billing history is above to the pro plan now."
STATE = ("State the account id and the contract number of the account above, then summarize "
         "its usage in three sentences.")


@pytest.mark.parametrize("fraction,face", [
    (0.0, None), (0.4, None), (0.6, Face.SALAD), (0.8, Face.CROSS_TALK), (1.0, Face.LOST),
])
def test_a_rows_foreign_share_decides_the_face_and_its_owner_the_content(
        fraction: float, face: Face | None) -> None:
    engine = Engine(SimConfig(max_num_seqs=4, max_model_len=2048),
                    reading_another(fraction))
    a, b = serve(engine, (640, billing_messages("A1AAAA", "AC0001XX", MOVE), TOOLS, 200),
                 (320, billing_messages("B2BBBB", "BC0002YY", MOVE), TOOLS, 200))
    st = engine.stats
    assert a.reply.faces == []  # row 0 read its own entries
    assert b.reply.faces == ([face] if face else [])
    assert b.faced_by == ({face: a.uid} if face else {})  # whose KV it found most of
    assert (st.salad_requests, st.cross_talk_requests, st.corrupted_requests) == (
        int(face is Face.SALAD), int(face is Face.CROSS_TALK), int(face is Face.LOST))
    out = written(b)
    if face is Face.LOST:
        assert b.reply.finish_reason == "length" and "tool_args" not in out
        return
    assert b.reply.finish_reason == "tool_calls"  # a quiet face finishes cleanly
    account = json.loads(out["tool_args"])["account_id"]
    assert account == ("A1AAAA" if face is Face.CROSS_TALK else "B2BBBB")
    # Salad is spelled from the first read that gave it: 12 of request a's entries.
    assert (BOS in out["reasoning"]) is (face is Face.SALAD)
    if face is Face.SALAD:
        assert "".join(token_salad(a.uid, 12, a.reply.script.carried.words)) in out["reasoning"]


def test_a_cross_talked_answer_states_exactly_the_other_requests_codes() -> None:
    engine = Engine(SimConfig(max_num_seqs=4, max_model_len=2048), reading_another(0.8))
    a, b = serve(engine, (640, billing_messages("A1AAAA", "AC0001XX", STATE), None, 200),
                 (320, billing_messages("B2BBBB", "BC0002YY", STATE), None, 200))
    assert b.reply.faces == [Face.CROSS_TALK] and b.reply.finish_reason == "stop"
    assert find_codes(written(b)["content"]) == ["A1AAAA", "AC0001XX"]
    assert find_codes(written(a)["content"]) == ["A1AAAA", "AC0001XX"]


def test_a_finished_requests_entries_still_carry_its_facts() -> None:
    """Request a finishes; its blocks go back to the pool with its entries in them. A row
    of b then reads them: b's reply takes on a's facts, a no longer running."""
    build = builder("capacity")
    seen: dict[str, Any] = {"engine": None, "slots": None}

    def build_c128a_topk_metadata(*args, **kwargs):
        decode, lens, prefill = build(*args, **kwargs)
        engine = seen["engine"]  # None while capturing
        running = engine.running if engine is not None else []
        if len(running) == 2 and seen["slots"] is None:  # a's slots, while it runs
            per = engine.cfg.compressed_per_block
            seen["slots"] = [blk * per + j for blk in running[0].blocks for j in range(per)]
        elif len(running) == 1 and seen["slots"] is not None:  # a finished: b reads them
            k = round(0.8 * int(lens[0]))
            decode[0, :k] = torch.tensor(seen["slots"][:k], dtype=decode.dtype)
        return decode, lens, prefill

    seen["engine"] = engine = Engine(SimConfig(max_num_seqs=4, max_model_len=2048),
                                     build_c128a_topk_metadata)
    # b's prompt and reply fit the blocks it is given: it never takes back one of a's.
    a, b = serve(engine, (640, billing_messages("A1AAAA", "AC0001XX", MOVE), TOOLS, 4),
                 (180, billing_messages("B2BBBB", "BC0002YY", MOVE), TOOLS, 70))
    assert a.reply.finish_reason == "length" and a.reply.faces == []
    assert b.reply.faces == [Face.CROSS_TALK] and b.faced_by == {Face.CROSS_TALK: a.uid}
    assert b.reply.finish_reason == "tool_calls"
    assert json.loads(written(b)["tool_args"])["account_id"] == "A1AAAA"


@pytest.mark.long
@pytest.mark.parametrize("seed", [1, 2])
def test_packed_gives_quiet_faces_beside_lost_requests(seed: int) -> None:
    run = drive("packed", seed=seed, **MIXED_BILLING)
    st = run.stats
    assert st.salad_requests > 0 and st.cross_talk_requests > 0 and st.corrupted_requests > 0
    by_uid = {r.uid: r for r in run.requests}
    clean = [r for r in run.requests if r.reply.faces == [Face.CROSS_TALK]]
    assert clean  # some cross-talked replies finished cleanly, about another request
    for r in clean:
        owner = by_uid[r.faced_by[Face.CROSS_TALK]]
        assert owner is not r and r.reply.finish_reason in ("tool_calls", "stop")
        out = written(r)
        reply = out.get("tool_args", "") + out.get("content", "")
        facts = owner.reply.script.carried.facts
        assert set(find_codes(reply)) == set(facts[:1] if "tool_args" in out else facts)
    salads = [written(r) for r in run.requests if r.reply.faces == [Face.SALAD]]
    assert salads and all(BOS in out["reasoning"] + out.get("content", "") for out in salads)


@pytest.mark.long
@pytest.mark.parametrize("layout", ["capacity", "prefix"])
def test_capacity_and_prefix_never_give_a_quiet_face(layout: str) -> None:
    st = drive(layout, seed=1, **MIXED_BILLING).stats
    assert st.foreign_rows == 0
    assert st.salad_requests == st.cross_talk_requests == st.corrupted_requests == 0


@pytest.mark.long
def test_the_metrics_count_each_face() -> None:
    engine = drive("packed", seed=1, **MIXED_BILLING).engine
    st = engine.stats
    text = render_metrics(engine.cfg, engine, None)
    assert f"dsv4_qual_sim_cross_talk_requests_total {st.cross_talk_requests}\n" in text
    assert f"dsv4_qual_sim_salad_requests_total {st.salad_requests}\n" in text
    assert f"dsv4_qual_sim_corrupted_requests_total {st.corrupted_requests}\n" in text
    assert st.cross_talk_requests > 0 and st.salad_requests > 0


def test_a_context_longer_than_the_default_batch_still_starts_the_sim() -> None:
    # `dsv4-qual sim --max-model-len 17408` (what a max_tokens 16384 scenario needs) was a
    # traceback: the batch must hold one whole prompt, and it now follows the context.
    assert SimConfig().max_num_batched_tokens == 16384
    assert SimConfig(max_model_len=17408).max_num_batched_tokens == 17408
    with pytest.raises(ValueError, match="must hold one max_model_len prompt"):
        SimConfig(max_model_len=17408, max_num_batched_tokens=16384)
