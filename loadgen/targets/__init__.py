"""The server under test: readiness, telemetry, receipts and which start they belong
to, restarts between rounds, and the seam that starts an embedded server (`embedded`).

Its modules are imported by path: the package offers no face of its own.
"""
