"""What the gateway does for the machine it runs on, apart from what it does for its users.

The product's logic (bindings, guards, the engine that builds them) is correct on any CPython
with none of this. Each piece here makes the same work cheaper or steadier on a host, was
added for a measured reason (the section of docs/performance.md that says so), and has a
switch (:mod:`ssegate.host.switches`) that turns it off; ``SSEGATE_HOST_TUNING=off`` turns
every one of them off at once, and the test suite runs the gateway that way too.

- :mod:`~.collector`: young generations collected from the loop, long-lived objects frozen,
  full collections only on growth the open streams do not explain. Off: ``SSEGATE_GC=python``.
- :mod:`~.allocator`: the process runs again on jemalloc, which returns freed pages. Off:
  ``SSEGATE_ALLOCATOR=python``.
- :mod:`~.turns`: new requests past a loop turn's budget wait for later turns. Off:
  ``SSEGATE_TURNS=off``.
- :mod:`~.worker_links`: the workers of one ``start`` share one Kafka fetch (worker 0's). Off:
  ``SSEGATE_SHARED_FETCH=off``.

:mod:`~.relay_wire` is the datagram format processes sharing a port use to pass challenge
answers to one another. It is a host's concern (it never leaves the machine) but not tuning:
without it an HTTP/1.1 challenge answer that reaches another process than its stream's would
extend nothing, so it has no switch.
"""
