"""What a foreign read does to a reply: the face its share gives, and what each face writes."""

from __future__ import annotations

import json
import unicodedata

import pytest

from server_patch.sim.carried import FIRST_PRUNE, CarriedFacts
from server_patch.sim.faces import Face, face_for
from server_patch.sim.facts import Carried, find_codes
from server_patch.sim.model import Piece, Reply, Script, make_script
from server_patch.sim.salad import BOS, BOS_BURST, SALAD_MAX_TOKENS, token_salad
from tests.sim.drive import TOOLS, billing_messages

OWN = ("Q7RT2M", "NW481302")
THEIRS = Carried(("B4KX9P", "CT77310A"), ("billing", "history", "ledger", "invoice"))
MOVE = "Move the account whose billing history is above to the pro plan now."
STATE = ("State the account id and the contract number of the account above, then summarize "
         "its usage in three sentences.")
DEFAULTS = {"salad": 0.5, "cross_talk": 0.7, "fatal": 0.9}


def tool_script() -> Script:
    return make_script(billing_messages(*OWN, MOVE), TOOLS)


def answer_script() -> Script:
    return make_script(billing_messages(*OWN, STATE), None)


def run(reply: Reply, steps: int | None = None) -> list[Piece]:
    pieces = []
    while not reply.done and (steps is None or len(pieces) < steps):
        pieces.append(reply.next_piece())
    return pieces


def text(pieces: list[Piece], *channels: str) -> str:
    return "".join(p.text for p in pieces if p.channel in channels)


# -- which face a share gives -----------------------------------------------------------


@pytest.mark.parametrize("share,face", [
    (0.0, Face.NONE), (0.5, Face.NONE), (0.51, Face.SALAD), (0.7, Face.SALAD),
    (0.71, Face.CROSS_TALK), (0.9, Face.CROSS_TALK), (0.91, Face.LOST), (1.0, Face.LOST),
])
def test_the_share_picks_the_face(share: float, face: Face) -> None:
    assert face_for(share, **DEFAULTS) is face


def test_bands_are_checked_from_the_most_severe() -> None:
    # A quiet threshold at or above a more severe one never fires; 1 turns a face off.
    assert face_for(0.85, salad=0.8, cross_talk=0.6, fatal=0.9) is Face.CROSS_TALK
    assert face_for(0.95, salad=0.5, cross_talk=0.7, fatal=1.0) is Face.CROSS_TALK
    assert face_for(1.0, salad=1.0, cross_talk=1.0, fatal=1.0) is Face.NONE
    assert face_for(0.01, salad=0.0, cross_talk=1.0, fatal=1.0) is Face.SALAD


# -- salad: a stretch, then back to the script --------------------------------------------


def scripts_of(tokens: list[str]) -> set[str]:
    return {unicodedata.name(ch).split()[0] for t in tokens if t != BOS for ch in t
            if ch.isalpha()}


def test_salad_is_spelled_from_the_read_and_mixes_scripts() -> None:
    salad = token_salad(42, 9, THEIRS.words)
    assert salad == token_salad(42, 9, THEIRS.words)  # the same read, the same salad
    assert salad != token_salad(43, 9, THEIRS.words)  # another owner's entries
    assert salad != token_salad(42, 10, THEIRS.words)  # more of them
    assert len(salad) < len(token_salad(42, 15, THEIRS.words)) <= SALAD_MAX_TOKENS
    start = salad.index(BOS)
    assert salad[start:start + BOS_BURST] == [BOS] * BOS_BURST and salad.count(BOS) == BOS_BURST
    assert len(scripts_of(salad) - {"LATIN"}) >= 3
    # Pieces of the owner's words, interleaved at sub-word level: never a whole word...
    latin = [t for t in salad if scripts_of([t]) == {"LATIN"}]
    assert latin and all(any(t in w for w in THEIRS.words) for t in latin)
    # ...and never a code: salad is not cross-talk.
    assert find_codes(" ".join(salad)) == []


def test_salad_is_written_for_a_stretch_then_the_reply_finishes_cleanly() -> None:
    healthy = run(Reply(tool_script(), 400))
    reply = Reply(tool_script(), 400)
    before = run(reply, 3)
    assert reply.take(Face.SALAD, THEIRS, owner=42, entries=9)
    after = run(reply)
    salad = token_salad(42, 9, THEIRS.words)
    assert [p.text for p in after[:len(salad)]] == salad
    assert all(p.channel == "reasoning" for p in after[:len(salad)])
    assert before + after[len(salad):] == healthy  # the script resumes where it was
    assert reply.finish_reason == "tool_calls" and reply.faces == [Face.SALAD]


def test_salad_in_an_answer_goes_to_the_content() -> None:
    reply = Reply(answer_script(), 400)
    pieces = run(reply)
    cut = next(i for i, p in enumerate(pieces) if p.channel == "content")
    reply = Reply(answer_script(), 400)
    run(reply, cut + 2)
    reply.take(Face.SALAD, THEIRS, owner=7, entries=3)
    content = text(run(reply), "content")
    assert BOS in content and reply.finish_reason == "stop"
    assert find_codes(content) == list(OWN)  # its own facts, still


# -- cross-talk: another request's facts in what it has yet to write --------------------


def test_cross_talk_acts_on_the_other_requests_account() -> None:
    reply = Reply(tool_script(), 400)
    run(reply, 2)
    assert reply.take(Face.CROSS_TALK, THEIRS, owner=42, entries=30)
    args = text(run(reply), "tool_args")
    assert json.loads(args) == {"account_id": THEIRS.facts[0], "plan": "pro"}
    assert reply.finish_reason == "tool_calls" and reply.faces == [Face.CROSS_TALK]


def test_cross_talk_states_exactly_the_other_requests_codes() -> None:
    reply = Reply(answer_script(), 400)
    assert reply.take(Face.CROSS_TALK, THEIRS, owner=42, entries=30)
    content = text(run(reply), "content")
    assert find_codes(content) == list(THEIRS.facts)
    assert reply.finish_reason == "stop"


def test_cross_talk_changes_only_what_is_yet_to_write() -> None:
    reply = Reply(tool_script(), 400)
    pieces = run(reply, 400)
    assert reply.done
    reply = Reply(tool_script(), 400)
    run(reply, len(pieces) - 1)  # the account is written; the reply is one piece short
    assert not reply.take(Face.CROSS_TALK, THEIRS, owner=42, entries=30)
    same = Carried(OWN, THEIRS.words)  # a request with the same facts changes nothing
    assert not Reply(tool_script(), 400).take(Face.CROSS_TALK, same, owner=42, entries=30)
    assert reply.faces == []


# -- a reply's face only escalates ------------------------------------------------------


def test_a_face_acts_once_and_only_a_more_severe_one_follows() -> None:
    reply = Reply(tool_script(), 400)
    assert reply.take(Face.CROSS_TALK, THEIRS, owner=42, entries=30)
    assert not reply.take(Face.SALAD, THEIRS, owner=42, entries=9)
    assert not reply.take(Face.CROSS_TALK, Carried(("ZZ11ZZ",)), owner=43, entries=30)
    assert reply.take(Face.LOST, THEIRS, owner=42, entries=40)
    assert not reply.take(Face.LOST, THEIRS, owner=42, entries=40)
    run(reply)
    assert reply.faces == [Face.CROSS_TALK, Face.LOST] and reply.face is Face.LOST
    assert reply.finish_reason == "length" and reply.lost


def test_a_lost_reply_drops_the_salad_it_had_yet_to_write() -> None:
    reply = Reply(tool_script(), 400)
    reply.take(Face.SALAD, THEIRS, owner=42, entries=9)
    run(reply, 2)
    reply.take(Face.LOST, THEIRS, owner=42, entries=40)
    assert BOS not in text(run(reply), "reasoning", "content")


# -- what a finished request carried, while its entries can be read ---------------------


def test_finished_requests_are_kept_while_the_pool_holds_their_entries() -> None:
    in_pool = {1, 2}
    carried = CarriedFacts(lambda: in_pool)
    for uid in range(1, FIRST_PRUNE + 1):
        carried.start(uid, Carried((f"AB{uid:04d}",)))
    carried.finish(1)
    assert carried.get(1) == Carried(("AB0001",))  # finished, still readable
    for uid in range(2, FIRST_PRUNE + 1):
        carried.finish(uid)  # the last one reaches the pruning point
    assert carried.get(1) == Carried(("AB0001",)) and carried.get(2) is not None
    assert carried.get(3) is None  # none of its entries is left: forgotten
    assert len(carried) == 2


def test_the_memory_stays_bounded_by_what_the_pool_holds() -> None:
    carried = CarriedFacts(lambda: range(1, 9))  # the pool holds 8 requests' entries
    for uid in range(1, 10_001):
        carried.start(uid, Carried())
        carried.finish(uid)
    assert len(carried) <= FIRST_PRUNE
