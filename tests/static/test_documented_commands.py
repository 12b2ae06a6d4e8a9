"""The compose commands the docs give an operator do what the docs say.

`docker compose up --exit-code-from X` without naming X after `up` attaches every
service: a server that dies makes Compose stop the load generator (exit 130, or 137
while it waits for the server), and a dead server must instead give a written, invalid
gate. A multi-node gate command that drops `--receipts-dir` can only exit 2 (the
release gate requires receipts), and a fixed `--out` fails the second night.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from static_support import COMPOSE, MULTINODE, REPO, SIM_COMPOSE

DOCS = [REPO / "README.md", REPO / "docker" / "README.md", *sorted((REPO / "docs").glob("*.md")),
        COMPOSE, MULTINODE, SIM_COMPOSE, *sorted((REPO / "fleet" / "ci").glob("*.yml"))]


def command_lines(path: Path) -> list[str]:
    """`docker compose ...` commands in a file, continuation lines joined, comment marks
    and prompts dropped, each cut at a shell separator."""
    text = re.sub(r"\\\n[#\s]*", " ", path.read_text())
    found = []
    for match in re.finditer(r"docker compose [^\n`|;&>]*", text):
        found.append(re.sub(r"\s+#.*", "", match.group(0)).strip())
    return found


COMMANDS = [(path.relative_to(REPO).as_posix(), line) for path in DOCS
            for line in command_lines(path)]
UPS = [(f, c) for f, c in COMMANDS if re.search(r"\bup\b", c) and "--exit-code-from" in c]
GATE_RUNS = [(f, c) for f, c in COMMANDS if re.search(r"\brun\b.* run (release-gate|\S+)", c)]


def test_the_docs_show_gate_commands() -> None:
    assert len(UPS) >= 6 and GATE_RUNS


@pytest.mark.parametrize(("doc", "command"), UPS, ids=[f"{f}:{c[:60]}" for f, c in UPS])
def test_up_names_the_service_whose_exit_code_it_returns(doc: str, command: str) -> None:
    words = shlex.split(command)
    service = words[words.index("--exit-code-from") + 1]
    after_up = words[words.index("up") + 1:]
    named = [w for w in after_up if not w.startswith("-") and w != service]
    assert service in after_up[after_up.index("--exit-code-from") + 2:], (
        f"{doc}: `{command}` attaches every service; name {service} after `up`")
    assert not named, f"{doc}: `{command}` also attaches {named}"


@pytest.mark.parametrize(("doc", "command"), GATE_RUNS,
                         ids=[f"{f}:{c[:60]}" for f, c in GATE_RUNS])
def test_a_documented_gate_run_keeps_its_receipts_and_a_fresh_results_dir(
        doc: str, command: str) -> None:
    assert "--receipts-dir" in command, f"{doc}: `{command}` can only exit 2 without receipts"
    assert "--out" not in command, f"{doc}: `{command}` would fail on its second run"
