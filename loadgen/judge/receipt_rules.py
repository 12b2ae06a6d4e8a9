"""What the patch receipts must prove before a candidate's clean replies may pass.

Clean replies alone can come from a broken server that was lucky (one request at a
time is clean in every layout), so a candidate's receipts are weighed too, and only
those of the processes that run the model (they build the C128A metadata; the API
server's receipt proves nothing about the builder):

- a receipt from a process that loaded the model (else: run invalid);
- every such process ran an accepted layout: ours in `gate.accept_layouts`
  (capacity, prefix), or upstream's own builder (layout `off`) only on a release whose
  builder writes an accepted layout and whose stride guard saw calls and no violation.
  `packed`, ours or upstream's (0.27.x), fails the gate: it is the bug;
- the model has C128A layers: the guard saw builder calls in every process that made
  C128A builders (else: run invalid, the builder was not reached or not watched). A
  model with none (DeepSeek-V4.1) passes this check with a statement that the gate
  rests on the replies alone, but only where the model watch's builder hook was
  installed: a process that made no builder while that hook failed is a run invalid
  (no layers and an unwatched builder look the same), and one whose guard saw builder
  calls has C128A layers whatever the count says.

Receipts found while the scenario does not require them are held to the same rules;
no receipt at all is then a statement, not a failure. For a control (the bug left
in), receipts are reported, never gated.
"""

from __future__ import annotations

from loadgen.judge.checks import Check
from loadgen.scenario import GateConfig
from loadgen.targets.receipts import UPSTREAM, ProcessReceipt, ReceiptFacts

PACKED = "packed"
#: What upstream's own builder writes, by release (server_patch.vllm_compat's table).
KNOWN_VARIANTS = frozenset({"capacity", "prefix", PACKED})
NAME = "patch receipts prove the C128A builder"


def _names(processes: list[ProcessReceipt]) -> str:
    return ", ".join(p.name for p in processes)


def _layouts(processes: list[ProcessReceipt]) -> str:
    return ", ".join(sorted({str(p.effective_layout) for p in processes}))


def receipts_check(cfg: GateConfig, receipts: ReceiptFacts, receipts_dir: str | None,
                   measured: int) -> Check:
    if cfg.role == "control":
        return Check("patch receipts (control: reported)", True,
                     _control_statement(receipts))
    if not receipts.processes:
        where = f" in {receipts_dir}" if receipts_dir else " (no target.receipts_dir)"
        if cfg.require_receipts:
            return Check(NAME, False, f"no patch receipt found{where}: the server cannot show "
                         "which C128A builder it ran", kind="error")
        return Check(NAME, True, f"no patch receipt{where}: the C128A layout the server ran "
                     "is unknown; the gate rests on the replies alone")
    model = receipts.model_processes
    if not model:
        missing_hooks = sorted({f"{p.name}: {h}: {status}" for p in receipts.processes
                                for h, status in p.hooks.items() if status != "ok"})
        detail = ("; hooks not installed: " + "; ".join(missing_hooks)) if missing_hooks else (
            "; receipts written before the model watch existed"
            if not any(p.model_known for p in receipts.processes) else "")
        return Check(NAME, False, f"no receipt from a process that runs the model (receipts "
                     f"from {_names(receipts.processes)}{detail}): the processes that build "
                     "C128A metadata must write their receipts where the run reads them",
                     kind="error")
    packed = [p for p in model if p.effective_layout == PACKED
              or (p.effective_layout == UPSTREAM and p.upstream_variant == PACKED)]
    if packed:
        return Check(NAME, False, f"the model ran the packed C128A layout (the #52448 bug) in "
                     f"{_names(packed)}")
    accepted = set(cfg.accept_layouts)
    ours_refused = [p for p in model if p.effective_layout != UPSTREAM
                    and p.effective_layout not in accepted]
    if ours_refused:
        return Check(NAME, False, f"the model ran layout {_layouts(ours_refused)} in "
                     f"{_names(ours_refused)}; the scenario accepts "
                     f"{', '.join(cfg.accept_layouts)}")
    upstream_unknown = [p for p in model if p.effective_layout == UPSTREAM
                        and p.upstream_variant not in KNOWN_VARIANTS]
    if upstream_unknown:
        return Check(NAME, False, f"the model ran upstream's own builder (layout off) in "
                     f"{_names(upstream_unknown)}, and what it writes in that vLLM release is "
                     "unknown", kind="error")
    upstream_refused = [p for p in model if p.effective_layout == UPSTREAM
                        and p.upstream_variant not in accepted]
    if upstream_refused:
        variants = ", ".join(sorted({str(p.upstream_variant) for p in upstream_refused}))
        return Check(NAME, False, f"the model ran upstream's own builder (layout off), which "
                     f"writes {variants} in this release, in {_names(upstream_refused)}; the "
                     f"scenario accepts {', '.join(cfg.accept_layouts)}")
    c128a = receipts.c128a_processes
    unwatched_layers = [p for p in model if p not in c128a
                        and p.hooks.get("c128a_builders", "ok") != "ok"]
    if unwatched_layers:
        hooks = "; ".join(sorted({f"{p.name}: {p.hooks['c128a_builders']}"
                                  for p in unwatched_layers}))
        return Check(NAME, False, "the model watch could not count C128A builders "
                     f"({hooks}), so a model without C128A layers cannot be told from a "
                     "builder that was never reached", kind="error")
    if not c128a:
        architectures = sorted({a for p in model for a in p.architectures}) or ["?"]
        return Check(NAME, True, f"the model ({', '.join(architectures)}) has no C128A layers "
                     f"(no C128A metadata builder in {_names(model)}): nothing to prove about "
                     "the C128A builder; the gate rests on the replies alone")
    unwatched = [p for p in c128a if not p.guard_on]
    if unwatched:
        return Check(NAME, False, f"the stride guard is off in {_names(unwatched)} "
                     "(DSV4_QUAL_GUARD=0): its builder calls cannot be seen", kind="error")
    silent = [p for p in c128a if p.guard_calls == 0]
    if silent:
        why = ("the C128A builder was not reached: 0 builder calls in every model process "
               f"while {measured} requests were served" if len(silent) == len(c128a)
               else f"no C128A builder call in {_names(silent)}")
        return Check(NAME, False, why, kind="error")
    upstream_violating = [p for p in c128a if p.effective_layout == UPSTREAM and p.violations]
    if upstream_violating:
        return Check(NAME, False, "upstream's own builder (layout off) left rows off the "
                     f"capacity stride in {_names(upstream_violating)}")
    calls = sum(p.guard_calls for p in c128a)
    return Check(NAME, True, f"{len(model)} model process(es) ran {_layouts(model)}; the stride "
                 f"guard saw {calls} C128A builder call(s) in {len(c128a)} of them")


def _control_statement(receipts: ReceiptFacts) -> str:
    if not receipts.processes:
        return "no patch receipt"
    model = receipts.model_processes
    if not model:
        return f"{len(receipts.processes)} receipt(s), none from a process that runs the model"
    return (f"the model ran {_layouts(model)} in {len(model)} process(es); "
            f"{sum(p.guard_calls for p in model)} guarded builder call(s), "
            f"{sum(p.violations for p in model)} violation(s)")


def describe_first_violation(first: dict[str, object] | None) -> str:
    """One line a person can read: where the rows went and where a graph reads them."""
    if not first:
        return ""
    views = first.get("views") or ["decode"]
    view = views[0] if isinstance(views, list) else "decode"
    return (f"builder call {first.get('call')}: {view} rows at stride "
            f"{first.get(f'{view}_row_stride')}, buffer row stride "
            f"{first.get(f'{view}_buffer_row_stride')} ({first.get('num_decode_tokens')} decode"
            f" + {first.get('num_prefill_tokens')} prefill tokens, width "
            f"{first.get('max_compressed_tokens')})")


def stride_check(receipts: ReceiptFacts, role: str) -> Check:
    """Zero violations count only if the guard saw builder calls: a guard that was off,
    or receipts that were never read, must not pass the gate by saying nothing. For a
    control, violations are expected (the bug is left in): reported, not gated."""
    violations, calls = receipts.violations, receipts.guard_calls
    first = describe_first_violation(receipts.first_violation)
    message = (f"{violations} violation(s) in {calls} guarded builder call(s)"
               + (f"; first at {first}" if first else ""))
    if role == "control":
        return Check("C128A stride violations (control: expected)", True, message)
    if violations == 0 and calls == 0:
        return Check("no C128A stride violations", False, kind="error",
                     message="the stride guard reported no builder calls (guard off, "
                             "receipts not read, or the builder never ran)")
    return Check("no C128A stride violations", violations == 0, message)
