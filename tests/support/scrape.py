"""Scraping a `--metrics-port` endpoint from a test, the way Prometheus would."""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.request
from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse(text: str) -> Samples:
    """{(sample name, sorted labels): value} of one exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def by_label(samples: Samples, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """The samples of one name keyed by the given labels' values (zeros left out)."""
    out = {}
    for (sample, labels), v in samples.items():
        if sample == name and v:
            found = dict(labels)
            out[tuple(found[k] for k in keys)] = v
    return out


def scrape(port: int, timeout: float = 5.0) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        return parse(r.read().decode())


class Scraper:
    """Scrapes the endpoint every `interval_s` in a thread until stopped; keeps each
    exposition it got (the endpoint may not be up yet, and goes away at the end)."""

    def __init__(self, port: int, interval_s: float = 0.05) -> None:
        self.port = port
        self.interval_s = interval_s
        self.seen: list[Samples] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with contextlib.suppress(OSError):
                self.seen.append(scrape(self.port, timeout=2.0))

    @property
    def last(self) -> Samples:
        assert self.seen, "the metrics endpoint was never scraped"
        return self.seen[-1]


@contextlib.contextmanager
def scraping(port: int, interval_s: float = 0.05) -> Iterator[Scraper]:
    scraper = Scraper(port, interval_s)
    scraper._thread.start()
    try:
        yield scraper
    finally:
        scraper._stop.set()
        scraper._thread.join()
