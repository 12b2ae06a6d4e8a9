"""docker/monitoring: Prometheus's config, the alert rules and the Grafana dashboard are
what Prometheus's own promtool accepts, the rules do what their unit tests say, and
they name only metrics the load generator serves and targets compose runs.

promtool is Debian's (`prometheus` package, 2.42 on bookworm); the compose profile runs
the prom/prometheus image, which cannot be pulled here: the files are checked with the
older promtool, and use nothing it does not know.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from static_support import (
    COMPOSE,
    MONITORING,
    REPO,
    env_example,
    flags,
    is_loadgen,
    is_server,
    model,
)

from loadgen.observe.metrics import GateFacts, LiveMetrics
from loadgen.scenario import load_scenario
from tests.support.prometheus import tool
from tests.support.scrape import parse

CONFIG = MONITORING / "prometheus.yml"
ALERTS = MONITORING / "alerts.yml"
ALERTS_TEST = MONITORING / "alerts.test.yml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
SERVICES = model(COMPOSE)["services"]


def promtool(*args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_promtool_accepts_the_config_and_its_rules() -> None:
    done = promtool("check", "config", CONFIG.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 rule files found" in done.stdout + done.stderr


def test_promtool_accepts_the_fleets_central_config_where_it_is(tmp_path: Path) -> None:
    """`promtool check config fleet/prometheus-central.yml` from the repository root, as
    a user tries it: its rules file resolves beside it (fleet/alerts.yml, a link to the
    one docker/monitoring/alerts.yml); and, as deployed, beside a copy of alerts.yml."""
    done = promtool("check", "config", "fleet/prometheus-central.yml", cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 rule files found" in done.stdout + done.stderr
    assert (REPO / "fleet" / "alerts.yml").resolve() == ALERTS.resolve()
    shutil.copy(REPO / "fleet" / "prometheus-central.yml", tmp_path / "prometheus.yml")
    shutil.copy(ALERTS, tmp_path / "alerts.yml")
    done = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 rule files found" in done.stdout + done.stderr


def test_promtool_accepts_the_rules() -> None:
    done = promtool("check", "rules", ALERTS.name)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_pass_their_unit_tests() -> None:
    done = promtool("test", "rules", ALERTS_TEST.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_unit_tests_catch_a_wrong_rule(tmp_path: Path) -> None:
    """Guards the check itself: a breach rule that forgets the role fires for a control
    that reproduced the bug, and its unit test says so."""
    (tmp_path / ALERTS.name).write_text(ALERTS.read_text().replace(
        'dsv4_qual_info{role="candidate"}', "dsv4_qual_info"))
    (tmp_path / ALERTS_TEST.name).write_text(ALERTS_TEST.read_text())
    done = promtool("test", "rules", ALERTS_TEST.name, cwd=tmp_path)
    assert done.returncode != 0 and "loadgen-control" in done.stdout + done.stderr


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    broken = tmp_path / "alerts.yml"
    broken.write_text(ALERTS.read_text().replace("last_over_time(", "last_over_time((", 1))
    done = promtool("check", "rules", str(broken))
    assert done.returncode != 0


def alert_names() -> list[str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [rule["alert"] for group in doc["groups"] for rule in group["rules"]]


def test_every_alert_is_tested_firing_and_silent() -> None:
    doc = yaml.safe_load(ALERTS_TEST.read_text())
    cases = [case for test in doc["tests"] for case in test["alert_rule_test"]]
    fires = {c["alertname"] for c in cases if c.get("exp_alerts")}
    silent = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    assert set(alert_names()) == {"Dsv4QualGateBreach", "Dsv4QualRoundInvalid",
                                  "Dsv4QualStoppedReporting", "Dsv4QualStalled"}
    assert fires == silent == set(alert_names())


def served_names() -> set[str]:
    """Every sample name the load generator serves once a run has been judged."""
    scenario = load_scenario("nightly-soak")
    metrics = LiveMetrics("soak", scenario)
    metrics.run_started(scenario)
    metrics.request_done("measurement", ["ok"])
    metrics._last_gate.facts = GateFacts(exit_code=0, at=0.0, receipts=2,
                                         stride_violations=0, layout="capacity")
    from prometheus_client import generate_latest

    names = {name for name, _ in parse(generate_latest(metrics.registry).decode())}
    metrics.close(linger=False)
    return names


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def test_the_rules_and_the_dashboard_name_only_served_metrics() -> None:
    served = served_names()
    texts = {ALERTS.name: ALERTS.read_text(), ALERTS_TEST.name: ALERTS_TEST.read_text(),
             DASHBOARD.name: "\n".join(dashboard_exprs())}
    for name, text in texts.items():
        named = set(re.findall(r"\bdsv4_qual_[a-z0-9_]+", text))
        assert named, name
        assert named <= served, f"{name} names {sorted(named - served)}, which nothing serves"
    named = set(re.findall(r"\bdsv4_qual_[a-z0-9_]+", texts[DASHBOARD.name]))
    for wanted in ("dsv4_qual_requests_total", "dsv4_qual_last_gate_exit_code",
                   "dsv4_qual_round_failures", "dsv4_qual_server_stride_violations",
                   "dsv4_qual_rounds_total"):
        assert wanted in named, f"the dashboard does not show {wanted}"


def _substitute_grafana_variables(expr: str) -> str:
    return (expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
            .replace("$job", "dsv4-qual").replace("$instance", ".*"))


def test_the_dashboard_is_a_grafana_dashboard_of_valid_promql(tmp_path: Path) -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] and doc["title"] and isinstance(doc["schemaVersion"], int)
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = doc["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    # promtool parses PromQL where it checks rules: each query as a recording rule.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": _substitute_grafana_variables(expr)}
        for i, expr in enumerate(dashboard_exprs())]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps(rules))
    done = promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def _targets(config: dict, job: str) -> set[str]:
    (scrape,) = [s for s in config["scrape_configs"] if s["job_name"] == job]
    return {t for static in scrape["static_configs"] for t in static["targets"]}


def test_prometheus_scrapes_every_load_generator_and_server_compose_runs() -> None:
    config = yaml.safe_load(CONFIG.read_text())
    assert config["rule_files"] == [ALERTS.name]
    loadgens = {}
    for name, svc in SERVICES.items():
        if is_loadgen(svc) and svc["command"][0] in ("run", "soak"):
            ports = [a.split("=", 1)[1] for a in svc["command"] if a.startswith("--metrics-port=")]
            assert ports, f"{name} serves no metrics (--metrics-port)"
            loadgens[name] = ports[0]
    assert _targets(config, "dsv4-qual") == {f"{n}:{p}" for n, p in loadgens.items()}
    servers = {f"{n}:{flags(s['command'])['--port']}" for n, s in SERVICES.items()
               if is_server(s)}
    assert _targets(config, "vllm") == servers


def test_the_monitoring_profile_runs_prometheus_on_the_shipped_files() -> None:
    monitoring = {n: s for n, s in SERVICES.items() if "monitoring" in s.get("profiles", [])}
    assert set(monitoring) == {"prometheus"}
    svc = monitoring["prometheus"]
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", svc["image"]), svc["image"]
    assert env_example().values["DSV4_PROMETHEUS_IMAGE"] == svc["image"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
    config = next(a.split("=", 1)[1] for a in svc["command"]
                  if a.startswith("--config.file="))
    assert mounts[config] == "./docker/monitoring/prometheus.yml"
    assert mounts[str(Path(config).parent / ALERTS.name)] == "./docker/monitoring/alerts.yml"
    assert all(v.endswith(":ro") for v in svc["volumes"] if v.startswith("./"))
    storage = next(a.split("=", 1)[1] for a in svc["command"]
                   if a.startswith("--storage.tsdb.path="))
    assert storage in mounts and not mounts[storage].startswith("./")
    assert "depends_on" not in svc  # it outlives the runs it watches


@pytest.mark.parametrize("path", [CONFIG, ALERTS, ALERTS_TEST], ids=lambda p: p.name)
def test_the_files_are_yaml(path: Path) -> None:
    assert isinstance(yaml.safe_load(path.read_text()), dict)


def test_ci_installs_prometheus_and_requires_it() -> None:
    """.ci/run installs the tools before the tests and makes a missing one a failure."""
    text = (COMPOSE.parent / ".ci" / "run").read_text()
    install = text.index("bash .ci/monitoring-tools.sh")
    require = text.index("export DSV4_QUAL_REQUIRE_PROMETHEUS=1")
    assert install < require < text.index("python -m pytest")


def test_a_missing_tool_skips_here_and_fails_where_required(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.prometheus import REQUIRE_ENV

    monkeypatch.setenv("DSV4_QUAL_PROMTOOL", "/nonexistent/promtool")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception):
        tool("promtool")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception):
        tool("promtool")


def test_no_metric_is_named_like_one_the_server_exports() -> None:
    """Prometheus scrapes both: the load generator's names must not be the plugin's or
    the sim's (which are only told apart by job)."""
    repo = COMPOSE.parent
    server_side = {name for path in (repo / "server_patch").rglob("*.py")
                   for name in re.findall(r"\bdsv4_qual_[a-z0-9_]+", path.read_text())}
    assert "dsv4_qual_server_info" in server_side
    assert not served_names() & server_side
