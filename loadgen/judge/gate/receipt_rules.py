"""What the patch receipts must prove before a candidate's clean replies may pass.

Clean replies alone can come from a broken server that was lucky (one request at a
time is clean in every layout), so a candidate's receipts are weighed too. Only the
receipts of the measured endpoints' current server starts count (`targets.epochs`: a
receipt names its start's id, the endpoint exports it on /metrics), and of those the
processes that run the model (they build the C128A metadata; the API server's receipt
proves nothing about the builder):

- every measured endpoint says which start it is (else no receipt can be tied to it:
  run invalid), and its start has a receipt from a process that loaded the model, from
  every data-parallel rank it serves and every worker of each rank (else: run invalid;
  a rank missing is, for one, a `--headless` node whose receipts no endpoint can vouch
  for);
- no process saw its stride guard count a violation: the builder left rows off the
  stride a captured CUDA graph reads. That fails the gate whatever the replies were and
  whatever `gate.fail_on_stride_violations` says (that key adds its own check: the guard
  must have seen builder calls at all);
- every model process ran an accepted layout: ours in `gate.accept_layouts`
  (capacity, prefix), or upstream's own builder (layout `off`) only on a release whose
  builder writes an accepted layout. `packed`, ours or upstream's (0.27.x), fails the
  gate: it is the bug;
- the model has C128A layers where its architecture or config says so: a DeepSeek-V4
  model (or drafter) must have made C128A builders and its guard seen their calls
  (else: run invalid, the builder was not reached or not watched). A model without
  them passes this check with a statement that the gate rests on its replies alone:
  DeepSeek-V4.1, recognised by its architecture, model type and compress ratios, and
  any model that is no DeepSeek-V4 at all; but only where the model watch's builder
  hook was installed (no layers and an unwatched builder look the same), and a process
  whose guard saw builder calls has C128A layers whatever the count says.

Receipts found while the scenario does not require them are held to the same rules;
none at all (or none of the measured start) is then a statement, not a failure. For a
control (the bug left in), receipts are reported, never gated.
"""

from __future__ import annotations

from collections import defaultdict

from loadgen.judge.gate.checks import Check, CheckKind
from loadgen.scenario import GateConfig
from loadgen.targets.receipts import UPSTREAM, EndpointStart, ProcessReceipt, ReceiptFacts

PACKED = "packed"
#: What upstream's own builder writes, by release (server_patch.vllm_compat's table).
KNOWN_VARIANTS = frozenset({"capacity", "prefix", PACKED})
NAME = "patch receipts prove the C128A builder"
REPLIES_ALONE = "the gate rests on the replies alone"


def _names(processes: list[ProcessReceipt]) -> str:
    return ", ".join(p.name for p in processes)


def _layouts(processes: list[ProcessReceipt]) -> str:
    return ", ".join(sorted({str(p.effective_layout) for p in processes}))


def _architectures(processes: list[ProcessReceipt]) -> str:
    return ", ".join(sorted({a for p in processes for a in p.architectures})) or "?"


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


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


def violations_text(receipts: ReceiptFacts) -> str:
    """How many violations, where, and the first one."""
    violating = receipts.violating
    first = describe_first_violation(receipts.first_violation)
    return (f"{receipts.violations} C128A stride violation(s) in {_names(violating)}"
            + (f"; the first at {first}" if first else ""))


def _set_aside_text(receipts: ReceiptFacts) -> str:
    shown = receipts.set_aside[:3]
    more = receipts.ignored - len(shown)
    return "; ".join(f"{s.file}: {s.reason}" for s in shown) + (
        f"; and {more} more" if more > 0 else "")


def _start_problems(endpoint: EndpointStart, server_id: str,
                    receipts: ReceiptFacts) -> str | None:
    """Why the receipts of one endpoint's start do not cover every process that serves it."""
    where = f"{endpoint.base_url} (server id {server_id})"
    mine = receipts.of_start(server_id)
    model = [p for p in mine if p.runs_model]
    if not model:
        missing_hooks = sorted({f"{p.name}: {h}: {status}" for p in mine
                                for h, status in p.hooks.items() if status != "ok"})
        detail = ("; hooks not installed: " + "; ".join(missing_hooks)) if missing_hooks else (
            "; receipts written before the model watch existed"
            if mine and not any(p.model_known for p in mine) else "")
        return (f"no receipt from a process that runs the model for {where} (receipts of "
                f"that start: {_names(mine) or 'none'}{detail}): the processes that build "
                "C128A metadata must write their receipts where the run reads them")
    unplaced = [p for p in model if p.parallel is None]
    if unplaced:
        return (f"the receipts of {_names(unplaced)} ({where}) do not say which "
                "data-parallel rank and worker they are, so whether every process that "
                "serves the endpoint wrote one cannot be told")
    layouts = {(p.parallel.ranks_served, p.parallel.world_size) for p in model if p.parallel}
    if len(layouts) > 1:
        return f"the model processes of {where} disagree on the parallel layout"
    (served, world), = layouts
    workers: dict[int, set[int]] = defaultdict(set)
    for p in model:
        assert p.parallel is not None
        workers[p.parallel.data_parallel_index].add(p.parallel.rank)
    if len(workers) < served:
        return (f"{where} serves {served} data-parallel rank(s), but only rank(s) "
                f"{_ranks(list(workers))} wrote a receipt of that start: the others run on "
                "another node (vLLM multi-node data parallel with --headless, whose "
                "processes no endpoint's server id vouches for) or wrote no receipt where "
                "the run reads them; gate each node through its own API server "
                "(docs/plugin.md, multi-node)")
    short = {rank: found for rank, found in workers.items() if len(found) < world}
    if short:
        rank, found = sorted(short.items())[0]
        return (f"data-parallel rank {rank} of {where} has receipts from worker(s) "
                f"{_ranks(list(found))} of its {world}: the others run on another node or "
                "wrote no receipt where the run reads them")
    return None


def _model_kind_problem(no_layers: list[ProcessReceipt]) -> str | None:
    """Processes that made no C128A builder although their model says it has C128A layers,
    or whose model cannot be told."""
    v4 = [p for p in no_layers if p.has_c128a_by_design]
    if v4:
        return (f"{_names(v4)} loaded a DeepSeek-V4 model ({_architectures(v4)}), which has "
                "C128A layers, and made no C128A metadata builder: the model watch missed "
                "them, so what the builder did cannot be known")
    unconfirmed = [p for p in no_layers if p.claims_deepseek_v41 and not p.is_deepseek_v41]
    if unconfirmed:
        return (f"{_names(unconfirmed)} loaded a model named DeepSeek-V4.1 "
                f"({_architectures(unconfirmed)}) whose receipt does not confirm it (its "
                "architecture, model type deepseek_v41 and compress ratios without 128)")
    unknown = [p for p in no_layers if not p.architectures]
    if unknown:
        return (f"the receipts of {_names(unknown)} do not say which model they loaded, so "
                "a model without C128A layers cannot be told from a builder never reached")
    return None


def _no_layers_statement(model: list[ProcessReceipt]) -> str:
    other = [p for p in model if not p.is_deepseek_v41]
    if other:
        return (f"the model ({_architectures(other)}) is not a DeepSeek-V4 model: it has no "
                f"C128A layers (no C128A metadata builder in {_names(other)}), so there is "
                f"nothing to prove about the C128A builder; {REPLIES_ALONE}")
    ratios = sorted({r for p in model for r in p.compress_ratios or ()})
    return (f"the model ({_architectures(model)}, DeepSeek-V4.1: compress ratios "
            f"{', '.join(map(str, ratios)) or 'none'}) has no C128A layers (no C128A "
            f"metadata builder in {_names(model)}): nothing to prove about the C128A "
            f"builder; {REPLIES_ALONE}")


#: What a run found at its receipts directory (server.json's receipts_dir_state).
MISSING_DIR_STATES = {"missing": "does not exist", "not_a_directory": "is not a directory",
                      "unreadable": "cannot be read"}


def receipts_check(cfg: GateConfig, receipts: ReceiptFacts, receipts_dir: str | None,
                   measured: int, dir_state: str | None = None) -> Check:
    if cfg.role == "control":
        return Check("patch receipts (control: reported)", True,
                     _control_statement(receipts))
    where = f" in {receipts_dir}" if receipts_dir else " (no target.receipts_dir)"
    missing = MISSING_DIR_STATES.get(dir_state or "")
    if missing and not receipts.found:
        # A directory named but absent is a mistake in the command, not a server that
        # wrote nothing: it must not read as a check that passed.
        text = (f"the receipts directory {receipts_dir} {missing} (target.receipts_dir, "
                "--receipts-dir): the C128A builder the server ran was not checked")
        if cfg.require_receipts:
            return Check(NAME, False, text, kind=CheckKind.ERROR)
        return Check(NAME, True, f"{text}; {REPLIES_ALONE}", skipped=True)
    if not receipts.found:
        if cfg.require_receipts:
            return Check(NAME, False, f"no patch receipt found{where}: the server cannot show "
                         "which C128A builder it ran", kind=CheckKind.ERROR)
        return Check(NAME, True, f"no patch receipt{where}: the C128A layout the server ran "
                     f"is unknown; {REPLIES_ALONE}")
    untied = [e for e in receipts.endpoints if e.problem]
    if untied or not receipts.endpoints:
        problems = "; ".join(str(e.problem) for e in untied) or (
            "no measured endpoint said which server start it is")
        return Check(NAME, False, f"{problems}: the {receipts.found} receipt(s){where} cannot "
                     "be tied to the server measured", kind=CheckKind.ERROR)
    if not receipts.processes:
        text = (f"no patch receipt{where} belongs to a measured endpoint's current server "
                f"start ({_set_aside_text(receipts)})")
        if cfg.require_receipts:
            return Check(NAME, False, text + ": the server cannot show which C128A builder "
                         "it ran", kind=CheckKind.ERROR)
        return Check(NAME, True, f"{text}; {REPLIES_ALONE}")
    model = receipts.model_processes
    packed = [p for p in model if p.effective_layout == PACKED
              or (p.effective_layout == UPSTREAM and p.upstream_variant == PACKED)]
    if packed:
        return Check(NAME, False, f"the model ran the packed C128A layout (the #52448 bug) in "
                     f"{_names(packed)}")
    if receipts.violations:
        return Check(NAME, False, f"the stride guard counted {violations_text(receipts)}: the "
                     "builder left rows off the capacity stride a captured CUDA graph reads")
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
                     "unknown", kind=CheckKind.ERROR)
    upstream_refused = [p for p in model if p.effective_layout == UPSTREAM
                        and p.upstream_variant not in accepted]
    if upstream_refused:
        variants = ", ".join(sorted({str(p.upstream_variant) for p in upstream_refused}))
        return Check(NAME, False, f"the model ran upstream's own builder (layout off), which "
                     f"writes {variants} in this release, in {_names(upstream_refused)}; the "
                     f"scenario accepts {', '.join(cfg.accept_layouts)}")
    for endpoint in receipts.endpoints:
        for server_id in endpoint.server_ids:
            problem = _start_problems(endpoint, server_id, receipts)
            if problem:
                return Check(NAME, False, problem, kind=CheckKind.ERROR)
    c128a = receipts.c128a_processes
    no_layers = [p for p in model if p not in c128a]
    unwatched_layers = [p for p in no_layers if p.hooks.get("c128a_builders", "ok") != "ok"]
    if unwatched_layers:
        hooks = "; ".join(sorted({f"{p.name}: {p.hooks['c128a_builders']}"
                                  for p in unwatched_layers}))
        return Check(NAME, False, "the model watch could not count C128A builders "
                     f"({hooks}), so a model without C128A layers cannot be told from a "
                     "builder that was never reached", kind=CheckKind.ERROR)
    kind_problem = _model_kind_problem(no_layers)
    if kind_problem:
        return Check(NAME, False, kind_problem, kind=CheckKind.ERROR)
    if not c128a:
        return Check(NAME, True, _no_layers_statement(model))
    unwatched = [p for p in c128a if not p.guard_on]
    if unwatched:
        return Check(NAME, False, f"the stride guard is off in {_names(unwatched)} "
                     "(DSV4_QUAL_GUARD=0): its builder calls cannot be seen", kind=CheckKind.ERROR)
    silent = [p for p in c128a if p.guard_calls == 0]
    if silent:
        why = ("the C128A builder was not reached: 0 builder calls in every model process "
               f"while {measured} requests were served" if len(silent) == len(c128a)
               else f"no C128A builder call in {_names(silent)}")
        return Check(NAME, False, why, kind=CheckKind.ERROR)
    calls = sum(p.guard_calls for p in c128a)
    return Check(NAME, True, f"{len(model)} model process(es) ran {_layouts(model)}; the stride "
                 f"guard saw {calls} C128A builder call(s) in {len(c128a)} of them and no "
                 "violation")


def _control_statement(receipts: ReceiptFacts) -> str:
    if not receipts.processes:
        return "no patch receipt of the measured server start" + (
            f" ({receipts.ignored} set aside)" if receipts.ignored else "")
    model = receipts.model_processes
    if not model:
        return f"{len(receipts.processes)} receipt(s), none from a process that runs the model"
    return (f"the model ran {_layouts(model)} in {len(model)} process(es); "
            f"{sum(p.guard_calls for p in model)} guarded builder call(s), "
            f"{sum(p.violations for p in model)} violation(s)")


def _without_layers(receipts: ReceiptFacts) -> str | None:
    """The statement for a model with no C128A layers, where the receipts show it soundly."""
    model = receipts.model_processes
    if not model or receipts.c128a_processes or _model_kind_problem(model) or any(
            p.hooks.get("c128a_builders", "ok") != "ok" for p in model):
        return None
    return _no_layers_statement(model)


def receipts_statement(cfg: GateConfig, receipts: ReceiptFacts) -> str:
    """The receipts' sentence in the gate's statement (what the run proves, in words).

    Stride violations are named with the first of them, for a candidate (they fail it)
    and for a control (they show the bug where the replies may not); a candidate whose
    model has no C128A layers is told that the gate rests on its replies alone.
    """
    if receipts.violations:
        if cfg.role == "control":
            return (f"The control's stride guard counted {violations_text(receipts)}: its "
                    "builder wrote the rows the bug misreads.")
        return (f"The candidate's stride guard counted {violations_text(receipts)}: its "
                "C128A builder wrote rows off the stride a captured CUDA graph reads, so "
                "it fails whatever its replies.")
    without = _without_layers(receipts) if cfg.role == "candidate" else None
    return without[0].upper() + without[1:] + "." if without else ""


def stride_check(receipts: ReceiptFacts, role: str) -> Check:
    """`gate.fail_on_stride_violations`: zero violations count only if the guard saw
    builder calls, so a guard that was off, or receipts that were never read, must not
    pass the gate by saying nothing (violations fail every candidate anyway, through
    `receipts_check`). For a control, violations are expected (the bug is left in):
    reported, not gated."""
    violations, calls = receipts.violations, receipts.guard_calls
    first = describe_first_violation(receipts.first_violation)
    message = (f"{violations} violation(s) in {calls} guarded builder call(s)"
               + (f"; first at {first}" if first else ""))
    if role == "control":
        return Check("C128A stride violations (control: expected)", True, message)
    if violations == 0 and calls == 0:
        return Check("no C128A stride violations", False, kind=CheckKind.ERROR,
                     message="the stride guard reported no builder calls (guard off, "
                             "receipts not read, or the builder never ran)")
    return Check("no C128A stride violations", violations == 0, message)
