"""dsv4-qual load generator: prime a server, measure it under concurrency, classify every reply."""

__version__ = "0.1.0"
