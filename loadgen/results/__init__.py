"""The results directory of one run: where it goes, its files, how a run is read back.

Everything a run learns goes to disk as it happens (records.jsonl line by line,
run.json at the start and at the end, server.json after the phases), and every
report is rebuilt from these files, so a killed run or a change of report code
loses nothing. One module per file, each with its pydantic model (written with
`model_dump`, read with `model_validate`, stamped with the schema: `schema`):
`run` (run.json), `server` (server.json), `summary` (summary.json), `qualification`
(qualify.json), `soak` (soak.json), `run_level` (run_level.jsonl's line; derived, so not
stamped); `directory` is where they go and who may write there.
records.jsonl lines stay `records.RequestRecord` (written on the client's hot path;
read back tolerantly by its own reader). How each file is written to disk: `files`.
"""

from __future__ import annotations

from loadgen.results.directory import (
    CANDIDATE_DIR,
    CONTROL_DIR,
    HTML_FILE,
    JUNIT_FILE,
    LOCK_FILE,
    MARKDOWN_FILE,
    QUALIFY_FILE,
    RECORDS_FILE,
    RESULTS_ROOT_ENV,
    RUN_FILE,
    SERVER_FILE,
    SUMMARY_FILE,
    claimed,
    default_out_dir,
    is_run_dir,
    new_run_id,
    prepare_out_dir,
    results_root,
)
from loadgen.results.run import RunFile, load_run, read_run, write_run
from loadgen.results.schema import RESULTS_SCHEMA, SCHEMA_KEY, check_schema, stamped
from loadgen.results.server import ServerFile, load_server, read_server, write_server
from loadgen.run_facts import RunFacts

__all__ = [
    "CANDIDATE_DIR", "CONTROL_DIR", "HTML_FILE", "JUNIT_FILE", "LOCK_FILE", "MARKDOWN_FILE",
    "QUALIFY_FILE", "RECORDS_FILE", "RESULTS_ROOT_ENV", "RESULTS_SCHEMA", "RUN_FILE",
    "SCHEMA_KEY", "SERVER_FILE", "SUMMARY_FILE", "RunFacts", "RunFile", "ServerFile",
    "check_schema", "claimed", "default_out_dir", "is_run_dir", "load_run", "load_server",
    "new_run_id", "prepare_out_dir", "read_run", "read_server", "results_root", "stamped",
    "write_run", "write_server",
]
