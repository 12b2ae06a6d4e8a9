"""Judging a run: each reply (verdicts), the run (aggregate, run-level verdicts), the gate."""
