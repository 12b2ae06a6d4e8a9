"""The load a scenario ships and the load a run used.

A scenario's claim ("below 0.3% at 95% under this load") holds for the load it ships:
its concurrency, its priming, its measured requests, its `max_tokens`, its rate. A
command-line override that weakens any of them (less concurrency or priming, fewer
measured requests or tokens, a slower rate) would let a server that fails only under
the shipped load pass quietly, so it is refused unless the user accepts it with one
explicit flag (`--accept-weaker-load`); then every report says the scenario's claim
does not hold as shipped. Either way, every report states the effective load beside
the shipped one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The load settings a scenario's claim rests on, in the order reports list them.
CLAIM_KEYS = ("concurrency", "priming", "measurement", "max_tokens", "rate_limit")
ACCEPT_FLAG = "--accept-weaker-load"


def _weaker(key: str, shipped: float, effective: float) -> bool:
    if key == "rate_limit":  # 0 is unlimited: any limit is slower, a lower one slower still
        return effective > 0 and (shipped == 0 or effective < shipped)
    return effective < shipped


def describe(values: dict[str, Any]) -> str:
    """'concurrency 64, priming 256, 1024 measured, max_tokens 16384, no rate limit'."""
    rate = values.get("rate_limit") or 0
    return (f"concurrency {values.get('concurrency')}, priming {values.get('priming')}, "
            f"{values.get('measurement')} measured, max_tokens {values.get('max_tokens')}, "
            + (f"rate limit {rate:g}/s" if rate else "no rate limit"))


@dataclass(frozen=True)
class LoadClaim:
    shipped: dict[str, Any]
    effective: dict[str, Any]
    weaker_accepted: bool = False
    changed: list[str] = field(init=False)
    weakened: list[str] = field(init=False)

    def __post_init__(self) -> None:
        changed, weakened = [], []
        for key in CLAIM_KEYS:
            a, b = self.shipped.get(key), self.effective.get(key)
            if a is None or b is None or a == b:
                continue
            words = f"{key} {b:g} (shipped: {a:g})"
            changed.append(words)
            if _weaker(key, float(a), float(b)):
                weakened.append(words)
        object.__setattr__(self, "changed", changed)
        object.__setattr__(self, "weakened", weakened)

    @property
    def holds_as_shipped(self) -> bool:
        return not self.weakened

    def sentence(self) -> str:
        """What the reports say of the load (empty when it is the scenario's own)."""
        if not self.changed:
            return ""
        if self.weakened:
            return (f"The load was weakened on the command line ({'; '.join(self.weakened)}; "
                    f"accepted with {ACCEPT_FLAG}): the scenario's claim does NOT hold as "
                    "shipped, only for this weaker load.")
        return (f"The load was changed on the command line ({'; '.join(self.changed)}), "
                "never below what the scenario ships.")

    def to_dict(self) -> dict[str, Any]:
        return {"shipped": self.shipped, "effective": self.effective,
                "changed": self.changed, "weakened": self.weakened,
                "weaker_accepted": self.weaker_accepted,
                "holds_as_shipped": self.holds_as_shipped}

    @classmethod
    def from_dict(cls, data: Any) -> LoadClaim | None:
        if not isinstance(data, dict) or not isinstance(data.get("shipped"), dict) \
                or not isinstance(data.get("effective"), dict):
            return None
        return cls(dict(data["shipped"]), dict(data["effective"]),
                   bool(data.get("weaker_accepted")))
