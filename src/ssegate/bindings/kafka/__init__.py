"""The ``kafka`` bindings: ``client`` (the cluster), ``cache_server`` (one shared fetch per topic
partition per process, with a bounded cache) and ``cache_client`` (what ``sse-kafka`` exits to)."""
