"""One local Spark session and one real Kafka broker for every pipeline test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from ssegate.pipeline.session import spark_session
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker
from ssegate_lab.testing.tools import prepared


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    prepared("spark-connector")
    session = spark_session("local[2]", "ssegate-pipeline-tests")
    yield session
    session.stop()
