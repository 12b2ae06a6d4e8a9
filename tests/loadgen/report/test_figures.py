"""The reports' figures: matplotlib imported without the set() docstrings it writes for
help() (nearly half its import), and the figures drawn the same to the byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

#: One report-like figure (a step line, markers, bars, a filled histogram, a dashed line,
#: a legend, labels), its PNG's bytes printed as hex.
DRAW = """
import sys
from loadgen.report import figures
if sys.argv[1] == "usual":  # matplotlib imported as anything else would import it
    import matplotlib.figure, matplotlib.backends.backend_agg
fig, (ax, bx) = figures.subplots(1, 2, figsize=(9, 3))
ax.step([0, 1, 2, 3], [0, 50, 25, 100], where="post", label="failure rate")
ax.plot([1, 3], [0, 0], "|", color="#b3261e", markersize=14, clip_on=False, label="failed")
ax.axvline(2, color="#888", ls="--", label="measurement")
ax.set(xlabel="request order (seq)", ylabel="% failed")
ax.legend(fontsize=8)
bx.bar([1, 2, 3], [10, 20, 5])
figures.histogram(bx, [0.1, 0.2, 0.2, 0.5, 0.9], bins=4, alpha=0.6, label="ttft")
import matplotlib.artist
kept = matplotlib.artist.Artist.__dict__["_update_set_signature_and_docstring"]
print(type(kept).__name__, kept.__func__.__qualname__)
print(figures.png_data_uri(fig))
"""


def _draw(mode: str) -> list[str]:
    return subprocess.run([sys.executable, "-c", DRAW, mode], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=True).stdout.splitlines()


def test_a_figure_is_drawn_the_same_to_the_byte_and_matplotlib_is_left_as_it_was() -> None:
    quick, usual = _draw("quick"), _draw("usual")
    assert quick[1] == usual[1] and quick[1].startswith("data:image/png;base64,")
    # The step is matplotlib's own again once it has imported: a class defined later
    # gets its set() signature and docstring as usual.
    assert quick[0] == usual[0] == "classmethod Artist._update_set_signature_and_docstring"


def test_set_takes_every_keyword_it_took() -> None:
    code = ("from loadgen.report.figures import subplots\n"
            "fig, ax = subplots(figsize=(4, 2))\n"
            "line, = ax.plot([0, 1], [1, 0])\n"
            "line.set(color='#b3261e', lw=3, linestyle='--', label='x')\n"
            "ax.set(xlabel='a', ylim=(0, 2))\n"
            "print(line.get_color(), line.get_linewidth(), line.get_linestyle(),"
            " ax.get_xlabel(), [float(v) for v in ax.get_ylim()])\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=300, check=True).stdout.strip()
    assert out == "#b3261e 3.0 -- a [0.0, 2.0]"
