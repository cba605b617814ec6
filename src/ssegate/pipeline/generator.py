"""The built-in generator source: synthetic raw records from Spark's ``rate`` source.

A generator yields the same columns as a Kafka source (``key``, ``value``, ``topic``,
``partition``, ``offset``, ``timestamp``, ``headers``), so what follows it (validation, transforms,
sinks) cannot tell the difference. Its ``topic`` is ``generator:<source name>`` and its offset
the ``rate`` source's row number, which is what a dead-letter record then names.

Shape ``sensors``: row ``n`` is a reading of device ``n mod devices`` (``device-007``), which
belongs to tenant ``device mod len(tenants)``; temperature and humidity follow a slow wave plus
noise, and ``ts`` is the row's time. About ``invalid_ratio`` of the rows are broken on purpose
(temperature ``"hot"``, or no ``device``), and the last ``silent_devices`` devices stop sending
after ``silent_after`` (rows are produced at ``rate`` per second from row 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ssegate.pipeline.config import Generator, duration_seconds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SENSOR_FIELDS = "device STRING, tenant STRING, temperature DOUBLE, humidity DOUBLE, ts TIMESTAMP"


def generated_records(spark: SparkSession, name: str, generator: Generator) -> DataFrame:
    """A stream of raw records in the generator's shape, Kafka-source columns."""
    from pyspark.sql import functions as F

    rows = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", generator.rate)
        .option("numPartitions", spark.sparkContext.defaultParallelism)
        .load()
    )
    n = F.col("value")
    index = F.pmod(n, F.lit(generator.devices))
    tenants = F.array(*[F.lit(t) for t in generator.tenants])
    device = F.format_string("device-%03d", index)
    tenant = F.element_at(tenants, (F.pmod(index, F.lit(len(generator.tenants))) + 1).cast("int"))
    noise = F.pmod(F.hash(n), F.lit(100)) / 25.0
    temperature = F.round(F.lit(21.0) + F.sin(n / 17.0 + index) * 8.0 + noise, 2)
    humidity = F.round(F.lit(45.0) + F.cos(n / 29.0 + index) * 20.0, 1)
    ts = F.date_format(F.col("timestamp"), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
    reading = F.to_json(
        F.struct(device.alias("device"), tenant.alias("tenant"),
                 temperature.alias("temperature"), humidity.alias("humidity"), ts.alias("ts"))
    )  # fmt: skip
    unreadable = F.to_json(
        F.struct(device.alias("device"), tenant.alias("tenant"),
                 F.lit("hot").alias("temperature"), ts.alias("ts"))
    )  # fmt: skip
    anonymous = F.to_json(
        F.struct(tenant.alias("tenant"), temperature.alias("temperature"), ts.alias("ts"))
    )
    broken = F.pmod(F.hash(n, F.lit(17)), F.lit(10_000)) < int(generator.invalid_ratio * 10_000)
    value = (
        F.when(broken & (F.pmod(n, F.lit(2)) == 0), unreadable)
        .when(broken, anonymous)
        .otherwise(reading)
    )
    silent_from = int(generator.rate * duration_seconds(generator.silent_after))
    silenced = (index >= generator.devices - generator.silent_devices) & (n >= silent_from)
    headers = F.lit(None).cast("array<struct<key:string,value:binary>>")
    return rows.where(~silenced).select(
        device.cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        F.lit(f"generator:{name}").alias("topic"),
        F.spark_partition_id().alias("partition"),
        n.alias("offset"),
        F.col("timestamp"),
        headers.alias("headers"),
    )
