"""What we know about the server a run talked to, read back from server.json.

The gate and every report state the same facts (the C128A layout the server ran,
its vLLM version, which patch receipts counted, how loaded it was), so they are
read once, here, into one typed object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadgen.targets.receipts import ReceiptFacts
from loadgen.targets.telemetry_summary import summarize


def server_versions(document: dict[str, Any]) -> list[str]:
    """What each server's /version said (vLLM answers {"version": "0.27.1"})."""
    found = set()
    for info in (document.get("servers") or {}).values():
        version = info.get("version")
        if isinstance(version, dict) and version.get("version"):
            found.add(str(version["version"]))
    return sorted(found)


@dataclass
class ServerFacts:
    document: dict[str, Any] = field(default_factory=dict)  # server.json as written
    layout: str | None = None
    layout_source: str | None = None
    receipts: ReceiptFacts = field(default_factory=ReceiptFacts)  # of this server start
    selection: dict[str, Any] = field(default_factory=dict)  # receipts_selection
    versions: list[str] = field(default_factory=list)  # from /version
    telemetry: dict[str, Any] = field(default_factory=dict)  # rates per server and total

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ServerFacts:
        return cls(
            document=document,
            layout=document.get("c128a_layout"),
            layout_source=document.get("c128a_layout_source"),
            receipts=ReceiptFacts.from_dicts(
                [r for r in document.get("receipts") or [] if r.get("counted", True)]),
            selection=document.get("receipts_selection") or {},
            versions=server_versions(document),
            telemetry=summarize(document),
        )

    @property
    def vllm_versions(self) -> list[str]:
        """From the receipts when there are any (they name the process's vLLM), else /version."""
        return self.receipts.vllm_versions or self.versions

    @property
    def samples(self) -> list[dict[str, Any]]:
        return list(self.document.get("samples") or [])
