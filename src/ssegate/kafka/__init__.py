"""The contract between the Kafka bindings and the ``sse-kafka`` proxy (:mod:`.topics`).

The local broker that the demo, the tests and the benchmarks run against is not part of the
gateway: it is ``ssegate_lab.broker``, next to the gateway in the repository.
"""
