"""The fast tier builds every report figure but draws only where a test reads pictures
(`conftest._figures_built_not_drawn`)."""

from __future__ import annotations

import struct

import pytest

from loadgen.report import figures


def _size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def test_a_test_that_reads_no_picture_gets_one_valid_pixel_for_each() -> None:
    fig, ax = figures.subplots(figsize=(4, 2))
    ax.plot([0, 1], [1, 0])
    assert _size(figures.encode_png(fig, 90)) == (1, 1)
    assert figures.png_data_uri(fig).startswith("data:image/png;base64,")


@pytest.mark.usefixtures("drawn_figures")
def test_a_test_that_asks_for_drawn_figures_gets_them_drawn() -> None:
    fig, ax = figures.subplots(figsize=(4, 2))
    ax.plot([0, 1], [1, 0])
    assert _size(figures.encode_png(fig, 50)) == (200, 100)
