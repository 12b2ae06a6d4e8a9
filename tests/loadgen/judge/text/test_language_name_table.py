"""The language-name table kept between processes: read back it is the table built from
the libraries, a key that differs (another library version, another source) builds it
again, and a cache that is broken or cannot be written changes nothing but the cost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen.judge.text import language_names as ln


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("DSV4_QUAL_CACHE", str(tmp_path))
    ln._table.cache_clear()
    ln._scan.cache_clear()
    yield tmp_path
    ln._table.cache_clear()
    ln._scan.cache_clear()


@pytest.fixture(scope="module")
def built() -> ln.Table:
    """The table the libraries build (no cache read or written): built once for the
    module, as every test compares what the cache gave with the same build."""
    return ln._build_table()


def _same(a: ln.Table, b: ln.Table) -> bool:
    return sorted(a[0].keys()) == sorted(b[0].keys()) and a[1] == b[1] and a[2] == b[2]


def test_the_kept_table_is_the_one_the_libraries_build(cache_root: Path,
                                                       built: ln.Table) -> None:
    first = ln._table()  # builds and keeps it
    kept = list((cache_root / "language-names").glob("*.json"))
    assert len(kept) == 1 and _same(first, built)
    ln._table.cache_clear()
    read = ln._read_table(kept[0])
    assert read is not None and _same(read, built)
    assert _same(ln._table(), built)
    # What the table answers is the same read back as built.
    ln._scan.cache_clear()
    assert ln.named("Ответь по-французски, s'il te plaît.") == (frozenset({"fr"}), False)
    assert ln.named("Reply in Spanglish.") == (frozenset({"es", "en"}), True)
    assert ln.names_dialect("Antworte auf Schweizerdeutsch.")
    assert not ln.names_dialect("Antwoord in het Nederlands.")


def test_a_table_kept_for_other_libraries_or_another_source_is_not_read(
        cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = ln._cache_file()
    assert here is not None and here.parent == cache_root / "language-names"
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda dist: "0.0.1" if dist == "language_data" else real(dist))
    other_library = ln._cache_file()
    monkeypatch.setattr(importlib.metadata, "version", real)
    monkeypatch.setattr(ln, "_CACHE_FORMAT", ln._CACHE_FORMAT + 1)
    other_format = ln._cache_file()
    assert len({here, other_library, other_format}) == 3


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b'{"format": 1}',
                                     b'{"format": 1, "sets": [], "keys": ["a"], '
                                     b'"entries": [[0, true, false, false]], "full": [], '
                                     b'"trie": ""}'])
def test_a_broken_cache_file_is_built_around(cache_root: Path, built: ln.Table,
                                            content: bytes) -> None:
    path = ln._cache_file()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert ln._read_table(path) is None
    assert _same(ln._table(), built)
    assert ln._read_table(path) is not None  # rewritten whole


def test_a_cache_that_cannot_be_written_changes_nothing(cache_root: Path,
                                                        built: ln.Table) -> None:
    (cache_root / "language-names").write_text("a file where the folder would be")
    assert _same(ln._table(), built)
    assert (cache_root / "language-names").is_file()
