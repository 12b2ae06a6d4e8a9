"""Scenario files for tests: a small default scenario, overridden table by table.

    write_scenario(tmp_path / "s.toml", load={"concurrency": 2, "measurement": 12},
                   gate={"prove_below": 0.5})

Each keyword names a table of the scenario (`loadgen.scenario.Scenario`: target, load,
request, workload, gate, verdicts, telemetry, reference, qualify, soak) and holds the
keys to set there, merged over `DEFAULTS` (nested tables too: `target={"sim": {...}}`
writes `[target.sim]`); a keyword whose value is not a dict is a top-level key (`name`,
`description`). `None` leaves a key out, and a table given as `None` is left out whole:
TOML has no null, so nothing else could mean it. Positional mappings are layers applied
before the keywords, in order: a module's own base scenario, then one test's changes;
`BARE` first leaves every default out.

Nothing here validates: a test of bad input can build a scenario the tool must refuse.
Stdlib only (the GPU hosts run some tests with few packages): tomli-w is not a
dependency, so the TOML is written here, and read back with tomllib before it is returned.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: A few seconds' run against the fake server: a tool turn each, a gate that is easy to
#: prove. The pydantic defaults would ask for 64 measured requests of 4096 tokens.
DEFAULTS: dict[str, dict[str, Any]] = {
    "load": {"concurrency": 4, "priming": 0, "measurement": 8},
    "request": {"max_tokens": 64},
    "workload": {"kind": "tool-turn"},
    "gate": {"prove_below": 0.9},
}

#: A first layer that leaves every default out: the file holds what the test names alone.
BARE: dict[str, None] = dict.fromkeys(DEFAULTS)

#: The order `loadgen.scenario.Scenario` declares its tables in, which the files follow.
ORDER = ("name", "description", "target", "load", "request", "workload", "gate", "verdicts",
         "telemetry", "reference", "qualify", "soak")

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `changes` over it: dicts merge key by key, None removes, else replaces."""
    merged = dict(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        elif isinstance(value, Mapping):
            merged[key] = _merge({}, value)  # drops the Nones inside a new table too
        else:
            merged[key] = value
    return merged


def scenario_data(*layers: Mapping[str, Any], **tables: Any) -> dict[str, Any]:
    """The scenario as a dict: `DEFAULTS`, each layer, then the keyword tables."""
    data: dict[str, Any] = _merge({}, DEFAULTS)
    for layer in (*layers, tables):
        data = _merge(data, layer)
    rank = {key: i for i, key in enumerate(ORDER)}
    return dict(sorted(data.items(), key=lambda item: rank.get(item[0], len(ORDER))))


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    # A JSON string with ASCII escapes is a TOML basic string, but for DEL, which JSON
    # leaves as it is and TOML does not allow unescaped.
    return json.dumps(text).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # inf, nan, 1e-05: TOML spells floats as Python does
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Path):
        return _string(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML value for {value!r} ({type(value).__name__})")


def _table(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    """Append `table`'s keys, then its subtables each under its own header."""
    for key, value in table.items():
        if not isinstance(value, Mapping):
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in table.items():
        if isinstance(value, Mapping):
            lines.append(f"[{'.'.join(_key(k) for k in [*path, key])}]")
            _table(lines, [*path, key], value)


def to_toml(data: Mapping[str, Any]) -> str:
    """`data` (nested dicts of str, int, float, bool, list, Path) as a TOML document."""
    lines: list[str] = []
    _table(lines, [], data)
    text = "\n".join(lines) + "\n"
    expected = json.loads(json.dumps(data, default=str))  # Paths as str, tuples as lists
    if tomllib.loads(text) != expected:  # pragma: no cover - a bug of this writer
        raise AssertionError(f"the TOML written does not read back as {data!r}:\n{text}")
    return text


def scenario_toml(*layers: Mapping[str, Any], **tables: Any) -> str:
    """The scenario file's text (see the module's docstring)."""
    return to_toml(scenario_data(*layers, **tables))


def write_scenario(path: Path, /, *layers: Mapping[str, Any], **tables: Any) -> Path:
    """Write the scenario file at `path` (see the module's docstring) and return `path`."""
    path.write_text(scenario_toml(*layers, **tables))
    return path
