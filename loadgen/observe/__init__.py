"""Views of a run from outside the process while it runs: the Prometheus metrics of
`--metrics-port` (`metrics`). The results directory stays the account of record."""
