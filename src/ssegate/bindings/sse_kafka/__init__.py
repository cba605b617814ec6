"""The ``sse-kafka`` proxy: Kafka topics as SSE streams, filtered per client, resumable by id."""
