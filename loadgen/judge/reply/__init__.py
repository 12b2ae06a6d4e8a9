"""The rules of one reply, one module per rule family, which `judge.verdicts` composes
as each reply completes: `loops` (+ `asked`: repetition the request asked for) and
`restatement`, `leaks`, `tool_calls`, `sequence`, `usage`, `substance` (+
`known_answers`), `reply_language` and `garbled/` (token salad, one module a detector);
and what a request gives reason for (`request_profile`, worked out once per body by the
engine). A rule reads one reply and its own request, never the run's other records: it
imports text helpers (`judge.text`) and other rules of one reply, never the run-level
rules, the gate or `verdicts` (the layers drawn in `loadgen.judge`)."""
