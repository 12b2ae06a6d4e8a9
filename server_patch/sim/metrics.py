"""The sim's /metrics in Prometheus text, with vLLM's metric names where they exist."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server_patch.server_start import metric_lines

if TYPE_CHECKING:
    from server_patch.sim.config import SimConfig
    from server_patch.sim.engine import Engine


def render_metrics(cfg: SimConfig, engine: Engine, guard: dict[str, Any] | None,
                   server_start: dict[str, Any] | None = None) -> str:
    st = engine.stats
    m = f'model_name="{cfg.model}"'
    lines = [
        "# HELP vllm:num_requests_running Requests in the running batch.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{m}}} {len(engine.running)}",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{m}}} {len(engine.waiting)}",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{m}}} {engine.pool.usage:.6f}",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{m}}} 0",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{m}}} {st.prompt_tokens}",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{m}}} {st.generation_tokens}",
        "# TYPE vllm:request_success_total counter",
        f"vllm:request_success_total{{{m}}} {st.finished_requests}",
        # vLLM V1's prefix-cache counters, in tokens (0 and 0 with the cache off).
        "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in tokens.",
        "# TYPE vllm:prefix_cache_queries_total counter",
        f"vllm:prefix_cache_queries_total{{{m}}} {st.prefix_cache_queries}",
        "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in tokens.",
        "# TYPE vllm:prefix_cache_hits_total counter",
        f"vllm:prefix_cache_hits_total{{{m}}} {st.prefix_cache_hits}",
        "# HELP dsv4_qual_c128a_layout_info The C128A builder layout this server runs.",
        "# TYPE dsv4_qual_c128a_layout_info gauge",
        f'dsv4_qual_c128a_layout_info{{layout="{cfg.layout}",device="{cfg.device}",'
        f'graph_mode="{cfg.graph_mode}",indexer="{cfg.indexer}"}} 1',
        "# HELP dsv4_qual_sim_indexer_shortcut_requests_total Requests whose prefill took "
        "the captured indexer shortcut with a long context (vLLM #52492).",
        "# TYPE dsv4_qual_sim_indexer_shortcut_requests_total counter",
        f"dsv4_qual_sim_indexer_shortcut_requests_total {st.indexer_shortcut_requests}",
        "# HELP dsv4_qual_sim_misread_facts_total Values an answer copied altered, by what "
        "the read of the entry holding them found: an entry the indexer never selected, "
        "or another request's.",
        "# TYPE dsv4_qual_sim_misread_facts_total counter",
        f'dsv4_qual_sim_misread_facts_total{{found="unselected"}} {st.unselected_facts}',
        f'dsv4_qual_sim_misread_facts_total{{found="foreign"}} {st.foreign_facts}',
        "# HELP dsv4_qual_sim_steps_total Engine steps (pure decode: replayed graph).",
        "# TYPE dsv4_qual_sim_steps_total counter",
        f'dsv4_qual_sim_steps_total{{kind="pure_decode"}} {st.pure_decode_steps}',
        f'dsv4_qual_sim_steps_total{{kind="other"}} {st.steps - st.pure_decode_steps}',
        "# HELP dsv4_qual_sim_replayed_steps_total Steps read through the captured consumers.",
        "# TYPE dsv4_qual_sim_replayed_steps_total counter",
        f"dsv4_qual_sim_replayed_steps_total {st.replayed_steps}",
        "# HELP dsv4_qual_sim_misread_rows_total Metadata rows (decode and prefill) that "
        "read anything but their own context.",
        "# TYPE dsv4_qual_sim_misread_rows_total counter",
        f"dsv4_qual_sim_misread_rows_total {st.misread_rows}",
        "# HELP dsv4_qual_sim_misread_prefill_rows_total Of those, prefill rows.",
        "# TYPE dsv4_qual_sim_misread_prefill_rows_total counter",
        f"dsv4_qual_sim_misread_prefill_rows_total {st.misread_prefill_rows}",
        "# HELP dsv4_qual_sim_wrong_read_rows_total Rows by what a wrong read found: "
        "another request's KV (foreign) or nothing (missing).",
        "# TYPE dsv4_qual_sim_wrong_read_rows_total counter",
        f'dsv4_qual_sim_wrong_read_rows_total{{found="foreign"}} {st.foreign_rows}',
        f'dsv4_qual_sim_wrong_read_rows_total{{found="missing"}} {st.missing_rows}',
        "# HELP dsv4_qual_sim_corrupted_requests_total Requests lost to a wrong read.",
        "# TYPE dsv4_qual_sim_corrupted_requests_total counter",
        f"dsv4_qual_sim_corrupted_requests_total {st.corrupted_requests}",
        "# HELP dsv4_qual_sim_cross_talk_requests_total Requests whose reply took on "
        "another request's facts after a read of its KV (a clean finish).",
        "# TYPE dsv4_qual_sim_cross_talk_requests_total counter",
        f"dsv4_qual_sim_cross_talk_requests_total {st.cross_talk_requests}",
        "# HELP dsv4_qual_sim_salad_requests_total Requests that wrote token salad for a "
        "stretch after a read of another request's KV (a clean finish).",
        "# TYPE dsv4_qual_sim_salad_requests_total counter",
        f"dsv4_qual_sim_salad_requests_total {st.salad_requests}",
        "# TYPE dsv4_qual_sim_finished_requests_total counter",
        f"dsv4_qual_sim_finished_requests_total {st.finished_requests}",
    ]
    if st.first_corruption_step is not None:
        lines += [
            "# HELP dsv4_qual_sim_first_corruption Where the first request was lost "
            "(engine step; requests finished cleanly before it).",
            "# TYPE dsv4_qual_sim_first_corruption gauge",
            f'dsv4_qual_sim_first_corruption{{at="step"}} {st.first_corruption_step}',
            f'dsv4_qual_sim_first_corruption{{at="finished_before"}} '
            f"{st.finished_before_first_corruption}",
        ]
    if guard is not None:
        lines += [
            "# TYPE dsv4_qual_c128a_builder_calls_total counter",
            f"dsv4_qual_c128a_builder_calls_total {guard.get('calls', 0)}",
            "# TYPE dsv4_qual_c128a_stride_violations_total counter",
            f"dsv4_qual_c128a_stride_violations_total {guard.get('violations', 0)}",
        ]
    if server_start is not None:  # the start its receipt names, as the plugin exports it
        lines += metric_lines(server_start)
    return "\n".join(lines) + "\n"
