"""The stamp every results file carries, and reading a file through its model.

A results directory outlives the release that wrote it (archives, another node's share,
`report` run again a year later), so each file says which format it is: an older one
is read as written, a newer one is refused rather than half-read into a verdict that
could rest on what this release does not know.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from loadgen.exit_codes import BadInputError
from loadgen.files import read_json, rounded, write_json

#: The results directory's format, stamped on run.json, server.json, summary.json and
#: qualify.json. 1: files written before the stamp, read as written (every reader takes
#: a key it does not find as unknown, never as a figure); 2: the stamp. A directory
#: stamped by a newer release is refused, not half-read: its verdict could rest on what
#: this one does not know.
RESULTS_SCHEMA = 2
SCHEMA_KEY = "schema"

M = TypeVar("M", bound=BaseModel)


def stamped(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with this release's results schema, as every file of a run is written."""
    return {SCHEMA_KEY: RESULTS_SCHEMA, **doc}


def check_schema(path: Path, doc: dict[str, Any]) -> int:
    """The schema a file was written with (1: no stamp); a newer one is bad input."""
    version = doc.get(SCHEMA_KEY, 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInputError(f"{path}: results schema {version!r} is not a version")
    if version > RESULTS_SCHEMA:
        raise BadInputError(f"{path}: written by a newer dsv4-qual (results schema {version}; "
                            f"this release reads up to {RESULTS_SCHEMA}): read it with that "
                            "release or a later one")
    return version


def one_line(exc: ValidationError) -> str:
    """A model's complaint as one line (where, what), as every refusal of bad input is."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}"
                     for e in exc.errors())


def validated(path: Path, doc: dict[str, Any], model: type[M]) -> M:
    """`doc`, read from `path`, checked for its stamp and validated by `model`; a file the
    model refuses is bad input naming the file, never a traceback."""
    check_schema(path, doc)
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise BadInputError(f"{path}: unreadable: {one_line(exc)}") from None


def read_file(path: Path, model: type[M]) -> M:
    """A results file through its model; a missing or unreadable file reads as an empty
    document (every model's defaults: the run never got that far)."""
    return validated(path, read_json(path), model)


def given(model: BaseModel, mode: str = "python") -> dict[str, Any]:
    """The model's dump with only the top-level keys it was given or read (a nested
    model keeps its defaults: the scenario in run.json is written whole)."""
    keys = model.model_fields_set | set(model.model_extra or {})
    return {k: v for k, v in model.model_dump(mode=mode).items() if k in keys}


def write_file(path: Path, model: BaseModel, *, round_floats: bool = False) -> None:
    """A results file from its model, stamped, with the keys it was given (a default it
    was not given is not written: the file says what the run knew); `round_floats` for
    the documents people read (12 significant digits, `files.rounded`)."""
    doc = stamped({k: v for k, v in given(model, mode="json").items() if k != SCHEMA_KEY})
    write_json(path, rounded(doc) if round_floats else doc)
