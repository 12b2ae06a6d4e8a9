"""What a run's checks covered: answers checked exactly, prefix reuse, transport retries.

A pass is a statement about what was checked. These sentences say how far it reaches:
how many measured replies had an answer the judge checked exactly (and the bound on the
failure rate among them), whether the server's prefix cache served the shared prefixes
the workload sent (vLLM #52492's failure showed only on a cache hit), and how many
requests were sent again after a kept connection closed under them (a transport event,
not a failure).
"""

from __future__ import annotations

from loadgen.judge.gate.answer_stats import CheckedAnswers
from loadgen.judge.gate.checks import Check, CheckKind
from loadgen.targets.telemetry_summary import PrefixReuse


def _pct(rate: float) -> str:
    return f"{100 * rate:.3g}%"


def answers_statement(answers: CheckedAnswers | None, measured: int) -> str | None:
    """How many measured replies were judged by an answer checked exactly."""
    if answers is None or not measured:
        return None
    if not answers.checked:
        return ("No measured request carried an answer that could be checked exactly: "
                "what this run says rests on the detectors of failure shapes alone.")
    bound = (f", so the failure rate among checked answers is below "
             f"{_pct(answers.upper_bound_95)} at 95% confidence"
             if answers.upper_bound_95 is not None and not answers.failed else
             f" (rate < {_pct(answers.upper_bound_95)} at 95%)"
             if answers.upper_bound_95 is not None else "")
    wrong = (f"; {answers.wrong} of them gave a wrong, another request's or an earlier "
             "turn's answer" if answers.wrong else "")
    return (f"{answers.checked} of {measured} measured replies had an answer checked "
            f"exactly (known answers, call arguments, planted facts); {answers.failed} of "
            f"them failed{wrong}{bound}.")


def reuse_statement(reuse: PrefixReuse | None, asks_reuse: bool) -> str | None:
    """What the server's prefix cache did during the measurement, where it says."""
    if reuse is None:
        return ("The server exports no prefix-cache counters: whether its prefix cache "
                "served the prefixes this workload shares is unknown." if asks_reuse
                else None)
    if reuse.rate is None:
        return None
    if asks_reuse and reuse.hits <= 0:
        return (f"The workload shares prefixes, but the server's prefix cache served none "
                f"of the {reuse.queries:,.0f} prompt tokens it looked up during the "
                "measurement: the prefix-cache paths were not exercised.")
    return (f"The server's prefix cache served {_pct(reuse.rate)} of the "
            f"{reuse.queries:,.0f} prompt tokens it looked up during the measurement.")


def reuse_check(reuse: PrefixReuse | None) -> Check:
    """`gate.require_prefix_reuse`: the measurement must have hit the prefix cache; a run
    that cannot show it did (no counters, or no hit) did not test what it claims."""
    name = "prefix cache reused"
    if reuse is None:
        return Check(name, False, "the server exports no prefix-cache counters "
                     "(vllm:prefix_cache_queries_total / _hits_total): reuse cannot be shown",
                     kind=CheckKind.ERROR)
    hit = reuse.hits > 0
    return Check(name, hit, f"{reuse.hits:,.0f} of {reuse.queries:,.0f} prompt tokens "
                 "served from the prefix cache during the measurement"
                 + ("" if hit else ": the prefix-cache paths were not exercised"),
                 kind=CheckKind.ERROR)


def retries_statement(retries: int) -> str | None:
    if not retries:
        return None
    return (f"{retries} measured request(s) were sent again after a kept connection the "
            "server had closed failed before any byte of the reply (transport retries, "
            "not server failures).")
