"""Sending: readiness, phases, one streamed reply into one record, --workers shards.

Its modules are imported by path (`loadgen.engine.runner`, ...): the package offers no
face of its own.
"""
