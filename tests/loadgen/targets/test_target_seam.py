"""The target seam: which server a command measures, and what a soak knows of its starts.

`serving` is the one place run and soak (and through run: qualify and demo) start an
embedded server; `StartTracker` decides, round to round, whether the server started
anew and the next round must prime.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.exit_codes import BadInputError
from loadgen.scenario import Scenario, TargetConfig
from loadgen.targets import embedded
from loadgen.targets.epochs import Look, endpoint_looks
from loadgen.targets.restarts import StartTracker


def test_a_url_wins_over_the_scenarios_embedded_server() -> None:
    assert TargetConfig(sim={}).embedded() == ("sim", TargetConfig(sim={}).sim.model_dump())
    assert TargetConfig(sim={}, base_urls=["http://h:1"]).embedded() is None
    assert TargetConfig().embedded() is None


def test_serving_a_scenario_with_urls_starts_nothing() -> None:
    scenario = Scenario.model_validate({"target": {"base_urls": ["http://h:1"]}})
    with embedded.serving(scenario) as (served, started):
        assert started is None and served is scenario


class Started:
    base_url = "http://127.0.0.1:9"
    receipts_dir = "/made/by/the/target"
    closed = False

    def stop(self) -> None:
        pass

    def close(self) -> None:
        Started.closed = True


def test_serving_an_embedded_target_points_the_run_at_it_and_closes_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: list[tuple[str, dict]] = []

    def start(name: str, options: dict) -> Started:
        asked.append((name, options))
        return Started()

    monkeypatch.setattr(embedded, "start_embedded", start)
    scenario = Scenario.model_validate({"target": {"sim": {"layout": "packed"}}})
    with pytest.raises(BadInputError, match="boom"), \
            embedded.serving(scenario, quiet=True) as (served, started):
        assert started is not None and served.target.base_urls == [Started.base_url]
        assert served.target.receipts_dir == Started.receipts_dir
        raise BadInputError("boom")
    assert Started.closed  # closed even when the block failed
    ((name, options),) = asked
    assert name == "sim" and options["layout"] == "packed" and options["quiet"] is True
    # A receipts folder the scenario names is where the target writes, and the run reads.
    named = scenario.with_overrides(receipts_dir=str(tmp_path))
    with embedded.serving(named) as (served, _):
        assert served.target.receipts_dir == str(tmp_path)
    assert asked[-1][1]["receipts_dir"] == str(tmp_path)


def test_a_soak_primes_until_it_knows_the_servers_start(fake_server) -> None:
    fake, srv = fake_server()
    tracker = StartTracker()
    reasons, seen = tracker.before_round([srv.url], verify_tls=True)
    assert reasons == ["no earlier observation of this server"]
    # After a round on it: the same start is not primed again...
    tracker.after_round({}, runner_saw_restart=False, observations=seen)
    assert tracker.before_round([srv.url], True)[0] == []
    # ...a new start is, and so is the round after one the runner saw restart.
    fake.restart()
    reasons, seen = tracker.before_round([srv.url], True)
    assert len(reasons) == 1 and "server id changed" in reasons[0]
    tracker.after_round({}, runner_saw_restart=True, observations=seen)
    assert tracker.before_round([srv.url], True)[0] == [
        "the server restarted during the previous round"]


def test_a_resumed_soak_without_a_recorded_start_primes() -> None:
    tracker = StartTracker()
    tracker.resume({"http://h:1": None}, {})
    assert tracker.previous is None
    tracker.resume({"http://h:1": 1700000000.0}, {})
    assert tracker.previous is not None
    assert tracker.previous["http://h:1"].start_time == 1700000000.0


def test_a_start_that_moved_while_the_round_ran_makes_the_next_round_prime() -> None:
    def metrics(server_id: str | None, start: float) -> str:
        lines = [f"process_start_time_seconds {start}"]
        if server_id:
            lines.append(f'dsv4_qual_server_info{{server_id="{server_id}"}} 1')
        return "\n".join(lines) + "\n"

    def doc(first: str, last: str) -> dict:
        return {"servers": {"http://h:1": {"metrics_before": first, "metrics_after": last}}}

    moved = endpoint_looks(doc(metrics("a", 100.0), metrics("b", 200.0)))
    assert moved["http://h:1"].last == Look("b", 200.0)
    tracker = StartTracker()
    tracker.after_round(moved, runner_saw_restart=False, observations=[])
    assert tracker.restarted_in_round
    assert tracker.previous is not None and tracker.previous["http://h:1"].server_id == "b"
    # The same id at both looks: no restart, whatever else the text says.
    tracker.after_round(endpoint_looks(doc(metrics("a", 100.0), metrics("a", 300.0))),
                        runner_saw_restart=False, observations=[])
    assert not tracker.restarted_in_round
    # Without ids, the process start time decides.
    tracker.after_round(endpoint_looks(doc(metrics(None, 100.0), metrics(None, 300.0))),
                        runner_saw_restart=False, observations=[])
    assert tracker.restarted_in_round
