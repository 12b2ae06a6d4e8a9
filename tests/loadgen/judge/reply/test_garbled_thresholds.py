"""The fixed thresholds of `garbled`'s detectors, each shown from both sides: at the
threshold the text is salad, just on the healthy side it is not (the judge must not flag
legitimate replies, and must not let salad through)."""

from __future__ import annotations

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.scenario import VerdictConfig
from tests.loadgen.judge.reply.test_garbled import noise


def kind_of(text: str, scripts: tuple[str, ...] = (), **cfg: object) -> str | None:
    found = garble_in_text(text, frozenset(scripts), VerdictConfig(**cfg))  # type: ignore[arg-type]
    return found[0] if found else None


def with_accents(text: str, count: int) -> str:
    """`count` characters of the text replaced by "é", 9 apart."""
    chars = list(text)
    for i in range(count):
        chars[i * 9 + 4] = "é"
    return "".join(chars)


def test_noise_is_ascii_up_to_a_tenth_of_its_window() -> None:
    # Random printable characters with 19 of 192 outside ASCII are noise; with 20 the
    # window is another script's text (the scripts detector's business), not noise.
    for seed in range(3):
        assert kind_of(with_accents(noise(192, seed), 19)) == "noise"
        assert kind_of(with_accents(noise(192, seed), 20)) is None
