"""What both HTML pages share: matplotlib without a display, figures as PNG data URIs (one
self-contained file), and their templates compiled once.

Figures are matplotlib's `Figure`s drawn by the Agg canvas directly, never through
pyplot: pyplot's import (its backend machinery, its registry of open figures) is a
cost every report paid and none needs, and a figure no registry holds needs no closing."""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Template


def subplots(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Any, Any]:
    """(figure, axes) as `pyplot.subplots` makes them (`figsize` and `gridspec_kw` as it
    takes them), on an Agg canvas: reports are written on headless CI machines."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=kwargs.pop("figsize", None))
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kwargs)


#: Room around the axes, in inches, for tick labels and axis labels: a report's figures
#: are small and labelled alike, so fixed margins do what a "tight" box did, at about
#: 30% less a figure (a tight box draws the figure twice: once to measure it, once to save it).
MARGINS_IN = {"left": 0.85, "right": 0.15, "bottom": 0.55, "top": 0.12}


def histogram(ax: Any, values: Sequence[float], bins: int, **style: Any) -> None:
    """A filled histogram drawn as one outline (`stairs`), not one patch a bin as
    `hist` draws it: the same picture at a fraction of the cost of laying out and
    drawing each bar (a report draws several of them)."""
    import numpy as np

    counts, edges = np.histogram(values, bins=bins)
    ax.stairs(counts, edges, fill=True, **style)


def png_data_uri(fig: Any, dpi: int = 90) -> str:
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=MARGINS_IN["left"] / width, right=1 - MARGINS_IN["right"] / width,
                        bottom=MARGINS_IN["bottom"] / height, top=1 - MARGINS_IN["top"] / height)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def png_bytes(fig: Any, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


@functools.cache
def page_template(text: str) -> Template:
    """A page's template, compiled once a process (tens of milliseconds a page otherwise)."""
    from jinja2 import Environment, select_autoescape  # only where a page is written

    return Environment(autoescape=select_autoescape(default=True)).from_string(text)
