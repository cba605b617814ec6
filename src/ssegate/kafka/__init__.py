"""Apache Kafka next to ssegate: the local broker the demo, tests and benchmarks run against."""

from ssegate.kafka.broker import (
    BrokerError,
    BrokerInfo,
    add_kafka_parser,
    broker_status,
    cli_kafka,
    default_data_dir,
    ensure_broker_jars,
    start_broker,
    stop_broker,
)

__all__ = [
    "BrokerError",
    "BrokerInfo",
    "add_kafka_parser",
    "broker_status",
    "cli_kafka",
    "default_data_dir",
    "ensure_broker_jars",
    "start_broker",
    "stop_broker",
]
