"""The fleet's tests use the load generator's fake server."""

from tests.loadgen.conftest import fake_server

__all__ = ["fake_server"]
