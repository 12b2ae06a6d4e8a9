"""One module per command (run, qualify, soak, demo, report, history): each composes a
job from the layers below and turns its outcome into an exit code.

Its modules are imported by path: the package offers no face of its own.
"""
