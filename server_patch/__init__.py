"""Runs inside vLLM (or the embedded reference server): the C128A builder, the plugin, receipts.

Importing this package imports neither vLLM nor loadgen nor triton.
"""
