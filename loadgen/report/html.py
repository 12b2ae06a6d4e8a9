"""report.html: one self-contained page (plots embedded as PNG data URIs).

The plots answer the questions people ask of a failing run: did failures start late
(#52448 was clean for its first 256 requests), do they grow with the number in
flight, do stuck requests pile up at max_tokens, what was the server doing.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, select_autoescape

from loadgen.exit_codes import EXIT_WORDS
from loadgen.judge.aggregate import PhaseStats, RunStats, failure_rate_by_order, ordered_timeline
from loadgen.report.figures import png_data_uri, pyplot
from loadgen.report.markdown import layout_text, receipts_text
from loadgen.report.telemetry_plots import telemetry_plots

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>dsv4-qual: {{ s.scenario }} ({{ s.gate.role }})</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.pass{color:#146c2e} .fail{color:#b3261e} pre{background:#f6f6f6;padding:8px;
white-space:pre-wrap;word-break:break-word;max-height:18em;overflow:auto}
img{max-width:100%;border:1px solid #eee;margin:.3em 0}
</style></head><body>
<h1>dsv4-qual: {{ s.scenario }} <small>({{ s.gate.role }})</small></h1>
<p class="{{ 'pass' if s.gate.passed else 'fail' }}" id="verdict"><b>{{ word }}</b>
(exit {{ s.gate.exit_code }}): {{ s.gate.failures }} of {{ s.gate.measured }} measured
requests failed the gate; allowed {{ s.gate.allowed }}.
{% if s.gate.upper_bound_95 is not none %} Failure rate &lt;
{{ '%.2f' % (100 * s.gate.upper_bound_95) }}% at 95% confidence.{% endif %}</p>
{% if s.gate.reasons %}<ul>{% for r in s.gate.reasons %}<li>{{ r }}</li>{% endfor %}</ul>{% endif %}
<table>
<tr><th>run id</th><td>{{ s.run_id }}</td></tr>
<tr><th>server(s)</th><td>{{ (s.target.base_urls or []) | join(', ') }}</td></tr>
<tr><th>model</th><td>{{ s.target.model }}</td></tr>
<tr><th>C128A layout the server ran</th><td id="layout">{{ layout }}</td></tr>
<tr><th>vLLM</th><td>{{ (s.target.vllm_versions or s.target.server_versions or [])
| join(', ') or '-' }}</td></tr>
{% if receipts %}<tr><th>patch receipts</th><td id="receipts">{{ receipts }}</td></tr>{% endif %}
<tr><th>stride violations (guard)</th>
<td>{{ s.target.receipts.stride_violations if s.target.receipts else '-' }}</td></tr>
<tr><th>client</th><td>CPU {{ s.client.cpu_util }},
loop lag p99 {{ s.client.loop_lag_ms_p99 }} ms {% if s.client.saturated %}
<b class="fail">(saturated: timings are the client's)</b>{% endif %}</td></tr>
</table>
{% for name, ph in s.phases.items() %}
<h2>{{ name }}: {{ ph.requests }} requests</h2>
<table><tr><th>verdict</th><th>requests</th><th>rate</th></tr>
{% for v, c in ph.verdicts.items() %}<tr><td>{{ v }}</td><td>{{ c }}</td>
<td>{{ '%.1f' % (100 * ph.rates[v]) if ph.rates[v] is not none else '-' }}%</td></tr>{% endfor %}
</table>
{% endfor %}
{% if telemetry %}
<h2>Server telemetry (/metrics)</h2>
<table id="telemetry"><tr><th>server</th><th>samples</th><th>max running</th>
<th>max waiting</th><th>max KV cache</th><th>prompt tok/s</th><th>generation tok/s</th>
<th>preemptions</th><th>spec-decode acceptance</th></tr>
{% for url, b in telemetry.items() %}<tr><td>{{ url }}</td><td>{{ b.samples }}</td>
<td>{{ fmt(b.max_requests_running, '.0f') }}</td><td>{{ fmt(b.max_requests_waiting, '.0f') }}</td>
<td>{{ fmt(b.max_kv_cache_usage * 100 if b.max_kv_cache_usage is not none else none, '.1f') }}%</td>
<td>{{ fmt(b.prompt_tokens_per_s, '.1f') }}</td><td>{{ fmt(b.generation_tokens_per_s, '.1f') }}</td>
<td>{{ fmt(b.preemptions, '.0f') }}</td>
<td>{{ fmt(b.spec_acceptance_rate * 100 if b.spec_acceptance_rate is not none else none, '.1f') }}%
</td></tr>{% endfor %}
</table>
{% endif %}
<h2>Plots</h2>
{% for title, uri in plots %}<figure><figcaption>{{ title }}</figcaption>
<img alt="{{ title }}" src="{{ uri }}"></figure>{% endfor %}
{% for name, failures in forensics %}
<h2>Reasoning tails of the first failures ({{ name }})</h2>
{% for f in failures %}<h3>seq {{ f.seq }}: {{ f.verdicts | join(', ') }}</h3>
<p>finish_reason {{ f.finish_reason }}, completion tokens {{ f.completion_tokens }}
{% if f.error %}, error: {{ f.error }}{% endif %}</p>
{% if f.reasoning_tail %}<p>reasoning tail</p><pre>{{ f.reasoning_tail }}</pre>{% endif %}
{% if f.content_tail %}<p>content tail</p><pre>{{ f.content_tail }}</pre>{% endif %}
{% endfor %}{% endfor %}
</body></html>
"""


def _plots(stats: RunStats, server: dict[str, Any],
           max_tokens: int | None) -> list[tuple[str, str]]:
    plt = pyplot()
    plots: list[tuple[str, str]] = []
    phases = stats.phases
    timeline = ordered_timeline(stats)
    if timeline:
        fig, ax = plt.subplots(figsize=(9, 3))
        bucket, xs, ys = failure_rate_by_order(timeline)
        ax.step(xs, ys, where="post", label=f"failure rate per {bucket} requests")
        bad = [t[0] for t in timeline if t[4]]
        ax.plot(bad, [-3] * len(bad), "|", color="#b3261e", label="failed request")
        if "priming" in phases and "measurement" in phases:
            ax.axvline(phases["priming"].requests, color="#888", ls="--", label="measurement")
        ax.set_xlabel("request order (seq)")
        ax.set_ylabel("% failed")
        ax.legend(fontsize=8)
        plots.append(("Verdicts against request order", png_data_uri(fig)))

        by_flight: dict[int, list[bool]] = defaultdict(list)
        for t in timeline:
            by_flight[t[2]].append(t[4])
        fig, ax = plt.subplots(figsize=(9, 3))
        keys = sorted(by_flight)
        ax.bar(keys, [100 * sum(by_flight[k]) / len(by_flight[k]) for k in keys])
        ax.set_xlabel("requests in flight when sent")
        ax.set_ylabel("% failed")
        plots.append(("Failure rate against the number in flight", png_data_uri(fig)))

    def _all(attr: str) -> list[float]:
        return [v for st in phases.values() for v in getattr(st, attr)]

    ttft, gaps, tokens = _all("ttft"), _all("gap_mean"), _all("completion_tokens")
    if ttft or gaps:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3))
        if ttft:
            axes[0].hist(ttft, bins=40)
        axes[0].set_xlabel("TTFT (s)")
        if gaps:
            axes[1].hist([g * 1000 for g in gaps], bins=40)
        axes[1].set_xlabel("mean inter-token gap per request (ms)")
        plots.append(("TTFT and inter-token distributions", png_data_uri(fig)))
    if tokens:
        fig, ax = plt.subplots(figsize=(9, 3))
        ax.hist(tokens, bins=50)
        if max_tokens:
            ax.axvline(max_tokens, color="#b3261e", ls="--", label="max_tokens")
            ax.legend(fontsize=8)
        ax.set_xlabel("completion tokens per request")
        plots.append(("Completion tokens (stuck requests pile up at max_tokens)",
                      png_data_uri(fig)))
    return plots


def write_html(path: Path, summary: dict[str, Any], stats: RunStats,
               server: dict[str, Any], max_tokens: int | None = None) -> None:
    from loadgen.report.build import write_atomic

    env = Environment(autoescape=select_autoescape(default=True))
    phases: dict[str, PhaseStats] = stats.phases
    html = env.from_string(_TEMPLATE).render(
        s=summary, word=EXIT_WORDS.get(summary["gate"]["exit_code"], "?"),
        plots=_plots(stats, server, max_tokens) + telemetry_plots(server),
        layout=layout_text(summary.get("target") or {}),
        receipts=receipts_text((summary.get("target") or {}).get("receipts_selection") or {}),
        telemetry=(summary.get("telemetry") or {}).get("servers") or {},
        fmt=lambda v, f: "-" if v is None else format(v, f),
        forensics=[(n, st.failures) for n, st in phases.items() if st.failures],
    )
    write_atomic(path, html.encode())
