"""The README stays short and true, and the docs it points to hold the rest.

The README is what a new user reads first: what it is, the two quickstart commands, the
compose path for GPU nodes, every command with an example, every scenario, the exit
codes, and links into docs/. What it leaves out lives in docs/: every link must reach a
file, and docs/cli.md must name every option of every command.
"""

from __future__ import annotations

import re

import click
import pytest
from static_support import REPO

from loadgen.cli import _load_command_plugins, cli
from loadgen.exit_codes import ExitCode

README = (REPO / "README.md").read_text()
CLI_DOC = (REPO / "docs" / "cli.md").read_text()
MAX_LINES = 250


def _commands() -> dict[str, click.Command]:
    _load_command_plugins()
    return dict(cli.commands)


def _sections(text: str) -> dict[str, str]:
    """`## title` -> the text up to the next `## ` heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_the_readme_is_at_most_250_lines() -> None:
    lines = len(README.splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_every_docs_link_of_the_readme_exists() -> None:
    links = set(re.findall(r"\bdocs/[\w.-]+\.md", README))
    assert len(links) >= 10, links
    missing = sorted(link for link in links if not (REPO / link).is_file())
    assert not missing, f"README.md links to docs that do not exist: {missing}"


@pytest.mark.parametrize("doc", sorted(p.name for p in (REPO / "docs").glob("*.md")))
def test_every_link_between_docs_exists(doc: str) -> None:
    text = (REPO / "docs" / doc).read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([\w./-]+\.md(?:#[\w-]*)?)\)", text)}
    missing = sorted(t for t in targets if not (REPO / "docs" / t).resolve().is_file())
    assert not missing, f"docs/{doc} links to files that do not exist: {missing}"


def test_the_readme_gives_every_command_an_example() -> None:
    for name in _commands():
        row = rf"^\| `{re.escape(name)}\b[^|]*\|[^|]+\| `dsv4-qual {re.escape(name)}\b"
        assert re.search(row, README, flags=re.M), (
            f"README's command table lacks `{name}` and an example")


def test_the_readme_names_every_scenario() -> None:
    for path in sorted((REPO / "scenarios").glob("*.toml")):
        assert re.search(rf"^\| `{re.escape(path.stem)}` \|", README, flags=re.M), (
            f"README's scenario table lacks {path.stem}")


def test_the_readme_gives_every_exit_code() -> None:
    codes = _sections(README)["Exit codes"]
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \|", codes, flags=re.M), f"exit code {int(code)}"


def test_the_readme_gives_the_two_quickstart_commands_and_the_compose_path() -> None:
    quick = _sections(README)["Quickstart"]
    assert "```bash\ndsv4-qual demo\n```" in quick
    assert "```bash\npython -m pytest\n```" in quick
    assert "docker compose up --build --exit-code-from loadgen loadgen" in README


def test_docs_cli_names_every_option_of_every_command() -> None:
    """Each command has a `## \\`name\\`` section naming its own options; the load options
    that `run`, `qualify` and `soak` share are named once, in their own section."""
    sections = _sections(CLI_DOC)
    shared = next(body for title, body in sections.items() if title.startswith("Load options"))
    missing = []
    for name, command in _commands().items():
        body = sections.get(f"`{name}`")
        if body is None:
            missing.append(f"section `{name}`")
            continue
        where = body + shared if name in ("run", "qualify", "soak") else body
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for opt in param.opts + param.secondary_opts:
                named = re.compile(rf"[`/]{re.escape(opt)}(?![\w-])")
                if opt.startswith("--") and not named.search(where):
                    missing.append(f"{name} {opt}")
    assert not missing, f"docs/cli.md does not name: {missing}"
