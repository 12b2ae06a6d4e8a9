"""Judging a run: each reply (verdicts), the run (aggregate, run-level verdicts), the gate.

The judge is split by role, and its imports point down these layers (held by
tests/test_architecture.py, which reads this drawing):

<!-- layers: loadgen.judge -->
| layer | loadgen.judge |
|---|---|
| entry points | `verdicts` (one reply, as it completes), `gate/` (the run, once it ended) |
| what a record's findings say | `findings` (every family's, read back through its types) |
| run-level rules | `run_level/` (a reply against the run's others) |
| per-reply rules | `reply/` (one module per rule family, `garbled/` among them) |
| text helpers | `text/`, `judge` (the package face) |
<!-- /layers -->
"""
