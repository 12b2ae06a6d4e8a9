"""matplotlib without a display, and figures as PNG data URIs (one self-contained file)."""

from __future__ import annotations

import base64
import io
from typing import Any


def pyplot() -> Any:
    """pyplot on the Agg backend: reports are written on headless CI machines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_data_uri(fig: Any, dpi: int = 90) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def png_bytes(fig: Any, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return buf.getvalue()
