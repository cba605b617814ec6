"""Code in C for what Python is too slow at, each with a pure-Python equivalent.

- :mod:`ssegate.native.fanout`: the same bytes to many sockets in one call (``_fanout.c``).

Everything here is optional: where the extension was not built, or ``SSEGATE_FANOUT=python``
is set, the pure-Python equivalent runs and gives the same answers.
"""
