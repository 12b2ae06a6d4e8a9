"""The qualification's report.html: control and candidate side by side, plots embedded.

The plots put both runs on the same axes, so the difference is the picture: the
control's failures climbing with request order and piling up at max_tokens, the
candidate flat at zero under the same load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadgen.judge.gate.qualification import Qualification
from loadgen.judge.gate.run_report import RunReport
from loadgen.report.figures import histogram, page_template, png_data_uri, subplots
from loadgen.report.qualify_doc import QualifyDocument, comparison_rows, verdict_rows

COLORS = {"control": "#b3261e", "candidate": "#146c2e"}

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>dsv4-qual {{ d.command }}: {{ d.scenario }}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:3px 8px;
text-align:left;vertical-align:top} th{background:#f3f3f3}
.pass{color:#146c2e} .fail{color:#b3261e} img{max-width:100%;border:1px solid #eee}
</style></head><body>
<h1>dsv4-qual {{ d.command }}: {{ d.scenario }}</h1>
<p id="verdict" class="{{ 'pass' if d.passed else 'fail' }}"><b>{{ d.headline }}</b></p>
{% if d.reasons %}<ul>{% for r in d.reasons %}<li>{{ r }}</li>{% endfor %}</ul>{% endif %}
{% if d.statements %}<ul id="statements">{% for r in d.statements %}<li>{{ r }}</li>
{% endfor %}</ul>{% endif %}
{% if d.difference_line %}<p id="difference">{{ d.difference_line }}</p>{% endif %}
<table id="sides"><tr><th></th><th>control (must reproduce)</th><th>candidate</th></tr>
{% for label, a, b in rows %}<tr><th>{{ label }}</th><td>{{ a }}</td><td>{{ b }}</td></tr>
{% endfor %}</table>
<p>Full reports: <a href="{{ d.control.results_dir }}/report.html">control</a>{% if d.candidate %},
<a href="{{ d.candidate.results_dir }}/report.html">candidate</a>{% endif %}.</p>
<h2>Measured verdicts</h2>
<table><tr><th>verdict</th><th>control</th><th>candidate</th></tr>
{% for n, a, b in verdicts %}<tr><td>{{ n }}</td><td>{{ a }}</td>
<td>{{ '-' if b is none else b }}</td></tr>{% endfor %}</table>
<h2>Plots</h2>
{% for title, uri in plots %}<figure><figcaption>{{ title }}</figcaption>
<img alt="{{ title }}" src="{{ uri }}"></figure>{% endfor %}
</body></html>
"""


def _legend(ax: Any) -> None:
    """A legend only when something was drawn with a label (an empty side draws nothing)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def _failure_rate(xlabel: str, draw: Callable[[Any], None]) -> str:
    """One "% failed" figure of both sides: `draw` puts each side on the axes."""
    fig, ax = subplots(figsize=(9, 3))
    draw(ax)
    ax.set_ylim(0, 100)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("% failed")
    _legend(ax)
    return png_data_uri(fig)


def _plots(sides: dict[str, RunReport]) -> list[tuple[str, str]]:
    def by_order(ax: Any) -> None:
        for name, report in sides.items():
            if report.timeline:
                bucket, xs, ys = report.failure_by_order
                ax.step(xs, ys, where="post", color=COLORS[name], label=f"{name} (per {bucket})")

    def by_in_flight(ax: Any) -> None:
        for name, report in sides.items():
            keys, rates = report.failure_by_in_flight
            if keys:
                ax.plot(keys, rates, marker="o", color=COLORS[name], label=name)

    plots = [
        ("Failure rate against request order, both sides",
         _failure_rate("request order (seq; priming first)", by_order)),
        ("Failure rate against the number in flight, both sides",
         _failure_rate("requests in flight when sent", by_in_flight)),
    ]

    fig, ax = subplots(figsize=(9, 3))
    max_tokens = None
    for name, report in sides.items():
        tokens = [v for st in report.stats.phases.values() for v in st.completion_tokens]
        max_tokens = max_tokens or report.scenario.request.max_tokens
        if tokens:
            histogram(ax, tokens, bins=50, alpha=0.6, color=COLORS[name], label=name)
    if max_tokens:
        ax.axvline(max_tokens, color="#555", ls="--", label="max_tokens")
    ax.set_xlabel("completion tokens per request")
    _legend(ax)
    plots.append(("Completion tokens (stuck requests pile up at max_tokens)", png_data_uri(fig)))
    return plots


def render_qualify_html(q: Qualification, doc: QualifyDocument) -> str:
    sides = {"control": q.control}
    if q.candidate is not None:
        sides["candidate"] = q.candidate
    return page_template(_TEMPLATE).render(
        d=doc, rows=comparison_rows(doc), verdicts=verdict_rows(doc), plots=_plots(sides))
