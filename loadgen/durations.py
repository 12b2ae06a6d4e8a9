"""Human durations ("8h", "90m", "1h30m", "45s", "3600") -> seconds.

Soaks are planned in hours; a typo such as "8" (seconds) or "8hr" must be an error
that names the value, not a soak that ends before it began.
"""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str | float | int) -> float:
    """Seconds in `text`; raises ValueError with the reason on anything else."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        raw = str(text).strip().lower().replace(" ", "")
        if not raw:
            raise ValueError("empty duration")
        if re.fullmatch(r"\d+(?:\.\d+)?", raw):
            seconds = float(raw)
        else:
            pos = 0
            seconds = 0.0
            for match in _PART.finditer(raw):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNIT_S[match.group(2)]
                pos = match.end()
            if pos != len(raw) or pos == 0:
                raise ValueError(f"{text!r} is not a duration (examples: 8h, 90m, 1h30m, 45s)")
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be positive")
    return seconds


def format_duration(seconds: float) -> str:
    """The short form people read: 8h, 1h30m, 45s."""
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "",
             f"{secs}s" if secs or not (hours or minutes) else ""]
    return "".join(parts)
