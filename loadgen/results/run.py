"""run.json: the resolved scenario and what the run learnt, written at its start and end.

`report` rebuilds every verdict from it and records.jsonl, so it holds the scenario
whole (validated as strictly as a scenario file: a key this release does not know could
change a verdict) and the run's facts (read tolerantly, `run_facts.RunFacts`: a fact an
older writer left out is unknown, one a newer writer added is ignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, TypeAdapter

from loadgen.exit_codes import BadInputError
from loadgen.files import read_json
from loadgen.results.directory import RUN_FILE
from loadgen.results.schema import validated, write_file
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario


def _facts(value: Any) -> Any:
    return value if isinstance(value, dict | RunFacts) else {}  # not an object: unknown


_NO_FACTS = TypeAdapter(RunFacts)


def _scenario(value: Any) -> Any:
    return value or {}  # a run.json cut before its scenario: the defaults


class RunFile(BaseModel):
    """run.json. Its own keys beyond these (an older or newer writer's) are ignored;
    RunFacts is a pydantic dataclass because the engine fills it in as the run goes."""

    model_config = ConfigDict(extra="ignore")

    scenario: Annotated[Scenario, BeforeValidator(_scenario)] = Field(
        default_factory=Scenario)
    run: Annotated[RunFacts, BeforeValidator(_facts),
                   PlainSerializer(lambda facts: facts.to_dict())] = Field(
        default_factory=lambda: _NO_FACTS.validate_python({}))


def write_run(out_dir: Path, scenario: Scenario, facts: RunFacts) -> None:
    """run.json: the resolved scenario and the run's facts (`report` needs both)."""
    write_file(out_dir / RUN_FILE, RunFile(scenario=scenario, run=facts))


def read_run(out_dir: Path) -> RunFile:
    """run.json through its model; a directory without one is not a results directory."""
    path = out_dir / RUN_FILE
    doc = read_json(path)
    if not doc:
        raise BadInputError(f"{out_dir}: no {RUN_FILE}: not a dsv4-qual results directory")
    return validated(path, doc, RunFile)


def load_run(out_dir: Path) -> tuple[Scenario, RunFacts]:
    """The scenario and run facts saved when the run started (and updated at its end)."""
    run = read_run(out_dir)
    return run.scenario, run.run
