"""The reliability suite drives the same real fake server as the loadgen tests."""

from tests.loadgen.conftest import fake_server  # noqa: F401
