"""The client's own benchmark (`dsv4-qual bench`): how fast the load generator sends and
judges, against a local stub server that costs nearly nothing.

Its modules are imported by path: the package offers no face of its own.
"""
