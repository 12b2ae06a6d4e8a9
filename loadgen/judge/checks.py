"""One gated check: what junit.xml writes as one testcase, and the report as one line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Check:
    name: str
    passed: bool
    message: str
    kind: str = "failure"  # "failure" fails the gate, "error" makes the run invalid
