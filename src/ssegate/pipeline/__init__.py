"""The data pipeline: Spark Structured Streaming jobs that check, shape and aggregate raw records
into the Kafka topics the gateway streams (``ssegate pipeline run -c PIPELINE.yaml``).

:mod:`~ssegate.pipeline.config` parses the pipeline file (no Spark needed);
:mod:`~ssegate.pipeline.session` starts Spark with its Kafka connector;
:mod:`~ssegate.pipeline.job` builds and starts the queries.
"""
