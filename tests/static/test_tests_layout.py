"""The load generator's tests mirror its packages: a test of `loadgen/judge/reply/` is in
`tests/loadgen/judge/reply/`, so the tests of a package are found where it is."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests" / "loadgen"


def test_every_loadgen_test_sits_in_the_folder_of_a_package() -> None:
    misplaced = []
    for test in sorted(TESTS.rglob("test_*.py")):
        folder = test.parent.relative_to(TESTS)
        if folder == Path(".") or not (REPO / "loadgen" / folder / "__init__.py").is_file():
            misplaced.append(str(test.relative_to(REPO)))
    assert not misplaced, f"not in a folder named after a loadgen package: {misplaced}"
