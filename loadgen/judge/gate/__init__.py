"""After the run: the counting pass, the gate and what the run proves. `aggregate` counts
records.jsonl per phase in one pass (showing each record to the run-level rules), with
`answer_stats` (checked answers and their failure rate), `session_view` (sessions turn
by turn), `spread` (failures by request order) and `coverage` (what a statement says the
run covered); `gate` turns the statistics into `checks` (with `receipt_rules`: what the
server's receipts must prove) and an exit code; `run_report` rebuilds a judged run from
its results directory alone; `qualification` (+ `difference`, the two-sample test)
compares a candidate with its control. The gate may import the run-level rules,
`findings` and the layers below them; no other part of the judge imports it (the layers
drawn in `loadgen.judge`)."""
