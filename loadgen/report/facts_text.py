"""Sentences about the server facts, shared by every human-readable report."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.targets.facts import ServerFacts
from loadgen.targets.receipts import ReceiptFacts
from loadgen.targets.telemetry_summary import MIN_SAMPLES, TelemetryTotals


def layout_text(server: ServerFacts) -> str:
    """The layout the server ran, and where we learnt it."""
    if not server.layout:
        return "unknown (no current patch receipt, no layout gauge in /metrics)"
    if server.layout_source:
        return f"{server.layout} (from {server.layout_source})"
    return str(server.layout)


def receipts_text(server: ServerFacts) -> str:
    """Which receipts were counted and why; empty when no receipts were looked for."""
    selection = server.selection
    if not selection.kept and not selection.ignored:
        directory = selection.receipts_dir
        return f"No patch receipt found in {directory}." if directory else ""
    text = (f"Patch receipts counted: {selection.kept}, those of the measured "
            f"endpoints' current server starts (by {selection.basis})")
    untied = [e.problem for e in selection.endpoints if e.problem]
    if untied:
        text += "; " + "; ".join(untied)
    if selection.ignored:
        listed = "; ".join(f"{a.file}: {a.reason}" for a in selection.set_aside[:5])
        text += f"; {selection.ignored} receipt(s) set aside ({listed[:600]})"
    return text + "."


def processes_text(receipts: ReceiptFacts) -> str:
    """Who wrote a receipt and what each ran: the model's processes first."""
    parts = []
    for p in sorted(receipts.processes, key=lambda p: not p.runs_model):
        role = ("runs the model, " + (f"{p.c128a_builders} C128A builder(s)" if p.c128a_builders
                                      else "no C128A layers")) if p.runs_model else "no model"
        parts.append(f"{p.name}: layout {p.effective_layout}"
                     + (f" (upstream {p.upstream_variant})" if p.effective_layout == "off" else "")
                     + f", {role}, guard {p.guard_calls} call(s) / {p.violations} violation(s)")
    return "; ".join(parts)


def num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def acceptance_text(block: TelemetryTotals) -> str:
    rate = block.spec_acceptance_rate
    if rate is None:
        return "-"
    return (f"{100 * rate:.1f}% ({block.spec_accepted_tokens:.0f} of "
            f"{block.spec_draft_tokens:.0f} drafted)")


TELEMETRY_COLUMNS = ("server", "samples", "max running", "max waiting", "max KV cache",
                     "prompt tok/s", "generation tok/s", "preemptions",
                     "spec-decode acceptance")


def telemetry_note(server: ServerFacts) -> str:
    """What the telemetry table leaves out: servers the run was too short to sample."""
    short = {url: b.samples for url, b in server.telemetry.servers.items()
             if b.samples < MIN_SAMPLES}
    return "; ".join(f"{url}: {n} /metrics sample(s), the run was too short to sample the "
                     "server under load" for url, n in short.items())


def telemetry_rows(server: ServerFacts) -> list[tuple[str, ...]]:
    """One row per server of what its /metrics said (TELEMETRY_COLUMNS), for servers
    sampled often enough to show something (`telemetry_note` names the others)."""
    rows: list[tuple[str, ...]] = []
    for url, b in server.telemetry.servers.items():
        if b.samples < MIN_SAMPLES:
            continue
        kv = b.max_kv_cache_usage
        rows.append((
            url, str(b.samples), num(b.max_requests_running, ".0f"),
            num(b.max_requests_waiting, ".0f"),
            f"{num(None if kv is None else 100 * kv, '.1f')}%",
            num(b.prompt_tokens_per_s, ".1f"), num(b.generation_tokens_per_s, ".1f"),
            num(b.preemptions, ".0f"), acceptance_text(b)))
    return rows


@dataclass(frozen=True)
class ServerWords:
    """What every run renderer says of the server, computed in one place so report.md
    and report.html cannot disagree."""

    layout: str
    receipts: str
    processes: str  # "" when no process wrote a receipt
    telemetry: list[tuple[str, ...]]  # rows under TELEMETRY_COLUMNS
    telemetry_note: str
    columns: tuple[str, ...] = TELEMETRY_COLUMNS


def server_words(server: ServerFacts) -> ServerWords:
    return ServerWords(
        layout=layout_text(server), receipts=receipts_text(server),
        processes=processes_text(server.receipts) if server.receipts.processes else "",
        telemetry=telemetry_rows(server), telemetry_note=telemetry_note(server))
