"""report.html: one self-contained page (plots embedded as PNG data URIs).

The plots answer the questions people ask of a failing run: did failures start late
(#52448 was clean for its first 256 requests), do they grow with the number in
flight, do stuck requests pile up at max_tokens, what was the server doing.
"""

from __future__ import annotations

from loadgen.exit_codes import EXIT_WORDS
from loadgen.judge.findings import findings_lines
from loadgen.judge.gate.run_report import RunReport
from loadgen.judge.gate.session_view import MAX_DETAILS
from loadgen.report.facts_text import server_words
from loadgen.report.figures import histogram, page_template, png_data_uri, subplots
from loadgen.report.run_text import (
    client_saturation,
    load_text,
    reference_lines,
    run_level_text,
)
from loadgen.report.telemetry_plots import telemetry_plots

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>dsv4-qual: {{ r.scenario.name }} ({{ g.role }})</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left} table.facts td{text-align:left}
p.empty{color:#555;font-style:italic}
.pass{color:#146c2e} .fail{color:#b3261e} pre{background:#f6f6f6;padding:8px;
white-space:pre-wrap;word-break:break-word;max-height:18em;overflow:auto}
img{max-width:100%;border:1px solid #eee;margin:.3em 0}
</style></head><body>
<h1>dsv4-qual: {{ r.scenario.name }} <small>({{ g.role }})</small></h1>
<p class="{{ 'pass' if g.passed else 'fail' }}" id="verdict"><b>{{ word }}</b>
(exit {{ g.exit_code }}):
{% if g.no_rate %}{{ g.no_rate }}.
{% elif g.role == 'control' %}{{ g.failures }} of {{ g.measured }} measured requests reproduced
the bug; it must exceed {{ g.allowed }}.
{% if g.failures and g.lower_bound_95 is not none %} Reproduction rate &gt;
{{ '%.2f' % (100 * g.lower_bound_95) }}% at 95% confidence.{% elif g.measured %} Did not
reproduce.{% endif %}
{% else %}{{ g.failures }} of {{ g.measured }} measured requests failed the gate; allowed
{{ g.allowed }}.
{% if g.failures > g.allowed and g.lower_bound_95 is not none %} Failure rate &gt;
{{ '%.2f' % (100 * g.lower_bound_95) }}% at 95% confidence.
{% elif g.upper_bound_95 is not none %} Failure rate &lt;
{{ '%.2f' % (100 * g.upper_bound_95) }}% at 95% confidence.{% endif %}{% endif %}</p>
<p id="proves"><b>What this run proves:</b> {{ g.statement }}</p>
{% if derived %}<p id="run-level">{{ derived }}</p>{% endif %}
{% if g.reasons %}<ul>{% for reason in g.reasons %}<li>{{ reason }}</li>{% endfor %}</ul>{% endif %}
{% if g.not_checked %}<ul id="not-checked">{% for item in g.not_checked %}<li><b>Not checked:</b>
{{ item }}</li>{% endfor %}</ul>{% endif %}
<table class="facts">
<tr><th>run id</th><td>{{ r.run.run_id }}</td></tr>
<tr><th>server(s)</th><td>{{ r.run.base_urls | join(', ') }}</td></tr>
<tr><th>model</th><td>{{ r.run.model }}</td></tr>
<tr><th>load</th><td id="load">{{ load }}</td></tr>
<tr><th>C128A layout the server ran</th><td id="layout">{{ server.layout }}</td></tr>
<tr><th>vLLM</th><td>{{ r.server.vllm_versions | join(', ') or '-' }}</td></tr>
{% if server.receipts %}<tr><th>patch receipts</th>
<td id="receipts">{{ server.receipts }}</td></tr>{% endif %}
<tr><th>stride violations (guard)</th>
<td>{{ r.server.receipts.violations if r.server.receipts.processes else '-' }}</td></tr>
{% if server.processes %}<tr><th>processes</th>
<td id="processes">{{ server.processes }}</td></tr>{% endif %}
<tr><th>client</th><td>CPU {{ r.run.client.cpu_util }},
loop lag p99 {{ r.run.client.loop_lag_ms_p99 }} ms {% if saturation %}
<br><b class="fail" id="saturation">{{ saturation }}</b>{% endif %}</td></tr>
</table>
{% for name, ph in phases.items() %}
<h2>{{ name }}: {{ ph.requests }} requests</h2>
<table><tr><th>verdict</th><th>requests</th><th>rate</th></tr>
{% for v, c in ph.verdicts.items() %}<tr><td>{{ v }}</td><td>{{ c }}</td>
<td>{{ '%.1f' % (100 * ph.rates[v]) if ph.rates[v] is not none else '-' }}%</td></tr>{% endfor %}
</table>
{% endfor %}
{% if g.answers %}<h2>Answers checked exactly (measurement)</h2>
<p id="answers">{{ g.answers.checked }} of {{ g.measured }} measured replies had an answer
checked exactly; {{ g.answers.failed }} of them failed, {{ g.answers.wrong }} with a wrong
answer.{% if g.answers.upper_bound_95 is not none %} Failure rate among them below
{{ '%.3g' % (100 * g.answers.upper_bound_95) }}% at 95%.{% endif %}
{% if g.prefix_cache and g.prefix_cache.rate is not none %} Prefix cache: {{
'{:,.0f}'.format(g.prefix_cache.hits) }} of {{ '{:,.0f}'.format(g.prefix_cache.queries) }}
prompt tokens served from it ({{ '%.1f' % (100 * g.prefix_cache.rate) }}%).{% endif %}</p>
{% for kind, cells in g.answers.breakdown.items() %}
<table class="breakdown"><tr><th>{{ kind }}</th><th>requests</th><th>failed</th><th>rate</th></tr>
{% for value, c in cells.items() %}<tr><td>{{ value }}</td><td>{{ c.requests }}</td>
<td>{{ c.failed }}</td><td>{{ '%.1f' % (100 * c.rate) }}%</td></tr>{% endfor %}</table>
{% endfor %}{% endif %}
{% if sessions %}<h2>Sessions, turn by turn (measurement)</h2>
<table id="sessions"><tr><th>session</th><th>shared prefix</th><th>turns</th><th>failed</th></tr>
{% for v in sessions %}<tr><td>{{ v.session }}</td><td>{{ v.prefix_tokens }}</td>
<td><code>{% for t in v.turns %}{{ '.' if t.ok else 'x' }}{% endfor %}</code></td>
<td>{{ v.failed | length }}</td></tr>{% endfor %}</table>
{% if failed_turns %}<table id="failed-turns"><tr><th>session, turn</th><th>regime</th>
<th>verdicts</th><th>asked</th><th>expected</th><th>got</th></tr>
{% for v, t in failed_turns %}<tr><td>{{ v.session }} #{{ t.index }}</td><td>{{ t.regime }}</td>
<td>{{ t.verdicts | join(', ') }}</td><td>{{ t.asked }}</td><td>{{ t.expected }}</td>
<td>{{ t.got }}</td></tr>{% endfor %}</table>{% endif %}{% endif %}
{% if reference %}<h2>Reference phase: the same server alone</h2>
<div id="reference">{% for line in reference %}<p>{{ line }}</p>{% endfor %}</div>{% endif %}
{% if server.telemetry or server.telemetry_note %}
<h2>Server telemetry (/metrics)</h2>{% endif %}
{% if server.telemetry %}
<table id="telemetry"><tr>{% for c in server.columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for row in server.telemetry %}<tr>{% for v in row %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}
</table>
{% endif %}
{% if server.telemetry_note %}
<p class="empty" id="telemetry-note">{{ server.telemetry_note }}.</p>{% endif %}
<h2>Plots</h2>
{% for title, uri, text in plots %}<figure><figcaption>{{ title }}</figcaption>
{% if uri %}<img alt="{{ title }}" src="{{ uri }}">{% else %}<p class="empty">{{ text }}</p>
{% endif %}</figure>{% endfor %}
{% for name, failures in forensics %}
<h2>Reasoning tails of the first failures ({{ name }})</h2>
{% for f in failures %}<h3>seq {{ f.seq }}: {{ f.verdicts | join(', ') }}</h3>
<p>finish_reason {{ f.finish_reason }}, completion tokens {{ f.completion_tokens }}
{% if f.error %}, error: {{ f.error }}{% endif %}</p>
{% if findings(f.why) %}<ul>{% for line in findings(f.why) %}<li>{{ line }}</li>
{% endfor %}</ul>{% endif %}
{% if f.reasoning_tail %}<p>reasoning tail</p><pre>{{ f.reasoning_tail }}</pre>{% endif %}
{% if f.content_tail %}<p>content tail</p><pre>{{ f.content_tail }}</pre>{% endif %}
{% endfor %}{% endfor %}
</body></html>
"""


Plot = tuple[str, str | None, str]  # (title, PNG data URI, or the sentence instead)


def _plots(report: RunReport) -> list[Plot]:
    plots: list[Plot] = []
    phases = report.stats.phases
    timeline = report.timeline
    if timeline:
        fig, ax = subplots(figsize=(9, 3))
        bucket, xs, ys = report.failure_by_order
        ax.step(xs, ys, where="post", label=f"failure rate per {bucket} requests")
        bad = [p.seq for p in timeline if p.failed]
        if bad:
            ax.plot(bad, [0] * len(bad), "|", color="#b3261e", markersize=14, clip_on=False,
                    label="failed request")
        if "priming" in phases and "measurement" in phases:
            ax.axvline(phases["priming"].requests, color="#888", ls="--", label="measurement")
        ax.set_ylim(0, 100)
        ax.set_xlabel("request order (seq)")
        ax.set_ylabel("% failed")
        ax.legend(fontsize=8)
        plots.append(("Verdicts against request order", png_data_uri(fig), ""))

        title = "Failure rate against the number in flight"
        if bad:
            fig, ax = subplots(figsize=(9, 3))
            ax.bar(*report.failure_by_in_flight)
            ax.set_ylim(0, 100)
            ax.set_xlabel("requests in flight when sent")
            ax.set_ylabel("% failed")
            plots.append((title, png_data_uri(fig), ""))
        else:
            plots.append((title, None, "No request failed: nothing to plot against the "
                                       "number in flight."))

    def _all(attr: str) -> list[float]:
        return [v for st in phases.values() for v in getattr(st, attr)]

    ttft, gaps, tokens = _all("ttft"), _all("gap_mean"), _all("completion_tokens")
    if ttft or gaps:
        fig, axes = subplots(1, 2, figsize=(9, 3))
        if ttft:
            histogram(axes[0], ttft, bins=40)
        axes[0].set_xlabel("TTFT (s)")
        if gaps:
            histogram(axes[1], [g * 1000 for g in gaps], bins=40)
        axes[1].set_xlabel("mean inter-token gap per request (ms)")
        plots.append(("TTFT and inter-token distributions", png_data_uri(fig), ""))
    if tokens:
        max_tokens = report.scenario.request.max_tokens
        fig, ax = subplots(figsize=(9, 3))
        histogram(ax, tokens, bins=50)
        ax.axvline(max_tokens, color="#b3261e", ls="--", label="max_tokens")
        ax.legend(fontsize=8)
        ax.set_xlabel("completion tokens per request")
        plots.append(("Completion tokens (stuck requests pile up at max_tokens)",
                      png_data_uri(fig), ""))
    return plots


def render_html(report: RunReport) -> str:
    gate = report.gate
    return page_template(_TEMPLATE).render(
        r=report, g=gate, word=EXIT_WORDS.get(gate.exit_code, "?"),
        phases=report.phase_summaries,
        plots=_plots(report) + telemetry_plots(report.server.samples_by_server),
        server=server_words(report.server),
        forensics=[(n, st.failures) for n, st in report.stats.phases.items() if st.failures],
        findings=findings_lines, load=load_text(report), derived=run_level_text(report),
        saturation=client_saturation(report.run.client).replace("**", ""),
        reference=reference_lines(report.stats.reference),
        sessions=report.sessions,
        failed_turns=[(v, t) for v in report.sessions for t in v.failed][:MAX_DETAILS],
    )
