"""Figures the `vllm` tier measured on the real server, printed at the end of the session
(conftest's terminal summary), so a CI log shows them without -s."""

from __future__ import annotations

LINES: list[str] = []


def report(line: str) -> None:
    LINES.append(line)
