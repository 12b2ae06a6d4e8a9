"""`dsv4-qual report DIR`: judge a results directory again and rewrite its reports.

A run, or a qualification's two sides and its side-by-side pages; a run killed before
its reports were written can be finished by hand (`report.outcome` does the judging).
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from loadgen.exit_codes import BadInputError
from loadgen.judge.gate.qualification import COMMANDS, decide
from loadgen.report import write_qualify_reports
from loadgen.report.outcome import one_line, rebuild_reports
from loadgen.results import CANDIDATE_DIR, CONTROL_DIR, QUALIFY_FILE, RUN_FILE, is_run_dir
from loadgen.results.qualification import read_qualification
from loadgen.results.soak import read_soak


def rebuild_any(out_dir: Path) -> tuple[int, str]:
    """Rebuild a run's reports, or a qualification's (qualify, demo): both sides and the
    side-by-side pages. (exit code as the command had it, the line to print)."""
    if is_run_dir(out_dir):
        outcome = rebuild_reports(out_dir)
        return outcome.exit_code, one_line(outcome.report)
    if is_run_dir(out_dir / CONTROL_DIR):
        control = rebuild_reports(out_dir / CONTROL_DIR).report
        candidate = (rebuild_reports(out_dir / CANDIDATE_DIR).report
                     if is_run_dir(out_dir / CANDIDATE_DIR) else None)
        # What the command that made it decided stays decided: its name, whether the
        # scenario let the sides serve different models.
        before = read_qualification(out_dir / QUALIFY_FILE)
        command = before.command if before.command in COMMANDS else "qualify"
        qualification = decide(out_dir, control.scenario.name, control, candidate,
                               allow_different_models=bool(before.model
                                                           and before.model.allowed),
                               command=command)
        doc = write_qualify_reports(qualification)
        return qualification.exit_code, f"{command} {doc.scenario}: {doc.headline}; " \
            f"reports in {out_dir}"
    if not out_dir.exists():
        raise BadInputError(f"{out_dir}: no such directory")
    if not out_dir.is_dir():
        raise BadInputError(f"{out_dir}: not a directory (a results directory holds "
                            f"{RUN_FILE} and records.jsonl)")
    raise BadInputError(soak_hint(out_dir) or (
        f"{out_dir}: not a dsv4-qual results directory (no {RUN_FILE}, "
        f"and no {CONTROL_DIR}/{RUN_FILE} of a qualify or demo run)"))


READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


def rebuild_into(results_dir: Path, out: Path | None) -> tuple[int, str]:
    """`report DIR [--out COPY]`: rebuild in place, or in a copy of DIR at COPY.

    A results directory on a read-only share (an archive, another user's run) is read,
    never written: --out copies it first. Writing in place where that is refused is bad
    input that says so and names --out, never a traceback.
    """
    source = results_dir
    if out is not None:
        if not results_dir.is_dir():
            raise BadInputError(f"{results_dir}: no such results directory")
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise BadInputError(f"--out {out}: exists and is not an empty folder")
        if out.resolve().is_relative_to(results_dir.resolve()):
            raise BadInputError(f"--out {out}: inside {results_dir}; choose a folder beside it")
        try:
            shutil.copytree(results_dir, out, dirs_exist_ok=True,
                            copy_function=shutil.copyfile)
            for folder in (out, *(d for d in out.rglob("*") if d.is_dir())):
                folder.chmod(folder.stat().st_mode | 0o700)  # a read-only source's modes
        except (OSError, shutil.Error) as exc:
            raise BadInputError(f"--out {out}: cannot copy {results_dir} there ({exc})") from None
        results_dir = out
    try:
        return rebuild_any(results_dir)
    except OSError as exc:
        if exc.errno in READ_ONLY and out is None:
            raise BadInputError(
                f"{source}: cannot write its reports there ({exc.strerror}); "
                f"`dsv4-qual report {source} --out NEW` rebuilds them in a copy") from None
        raise BadInputError(f"{results_dir}: cannot rebuild its reports "
                            f"({exc.strerror or exc}: {exc.filename})") from None


def soak_hint(folder: Path) -> str | None:
    """A soak's folder holds rounds, each a run: name them and the history's command."""
    own = _rounds(folder)
    soaks = [(folder, own)] if own else [(d, r) for d in sorted(_subfolders(folder))
                                         if (r := _rounds(d))]
    if not soaks:
        return None
    last, rounds = soaks[-1]
    try:
        history = read_soak(last).history
    except BadInputError:  # a hint, never a second failure: the rounds are named anyway
        history = None
    where = ("a soak's folder" if last == folder
             else f"a soak's --out folder ({len(soaks)} soak(s); the last: {last.name})")
    trend = (f"; the soak's trend: `dsv4-qual history {history}`" if isinstance(history, str)
             else "; the soak's trend: `dsv4-qual history DB` on its --history")
    return (f"{folder}: {where}, not one run: its rounds are each a results directory "
            f"({rounds[0].name} to {rounds[-1].name}: {len(rounds)}): "
            f"`dsv4-qual report {rounds[-1]}`{trend}")


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [d for d in folder.iterdir() if d.is_dir()]
    except OSError:
        return []


def _rounds(folder: Path) -> list[Path]:
    return sorted(d for d in _subfolders(folder)
                  if d.name.startswith("round-") and is_run_dir(d))


