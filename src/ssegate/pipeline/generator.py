"""The built-in generator source: synthetic raw records from Spark's ``rate`` source.

A generator yields the same columns as a Kafka source (``key``, ``value``, ``topic``,
``partition``, ``offset``, ``timestamp``, ``headers``), so what follows it (validation, transforms,
sinks) cannot tell the difference. Its ``topic`` is ``generator:<source name>`` and its offset
the ``rate`` source's row number, which is what a dead-letter record then names.

Shape ``sensors``: row ``n`` is a reading of device ``n mod devices`` (``device-007``), which
belongs to tenant ``device mod len(tenants)``, taken ``n / rate`` seconds after the start (its
``ts``). Each tenant's devices take the rooms of :data:`ROOMS` in turn, and a room says how its
temperature goes, on a ``day`` of a few minutes (``day: 4 minutes``), so that the same input tells
the same story on every run:

- ``server room``: steady at 28 °C, except that once every half day it overheats, up to 33 °C
  and back within a third of the half day; the tenants take turns (the first tenant a sixth of a
  day after the start, each next one a third of a half day later), so each tenant's readings over
  30 °C come in one burst per half day, from its own server room;
- ``office``: 23 °C ± 2 with the day (warmest a quarter day after the start);
- ``lab``: a sensor that drifts, from 14 °C up by 6 °C over two and a half days, then starts over;
- ``warehouse``: 10 °C ± 2 with the day.

Every reading has ±0.2 °C of noise and a humidity that falls as the day warms. About
``invalid_ratio`` of the rows are broken on purpose (temperature ``"hot"``, or no ``device``), and
the last ``silent_devices`` devices stop sending after ``silent_after`` (rows are produced at
``rate`` per second from row 0).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ssegate.pipeline.config import Generator, duration_seconds

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SENSOR_FIELDS = (
    "device STRING, tenant STRING, room STRING, temperature DOUBLE, humidity DOUBLE, ts TIMESTAMP"
)
ROOMS = ("server room", "office", "lab", "warehouse")


def generated_records(spark: SparkSession, name: str, generator: Generator) -> DataFrame:
    """A stream of raw records in the generator's shape, Kafka-source columns."""
    rows = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", generator.rate)
        .option("numPartitions", spark.sparkContext.defaultParallelism)
        .load()
    )
    return sensor_records(rows, name, generator)


def sensor_records(rows: DataFrame, name: str, generator: Generator) -> DataFrame:
    """``rows`` of the ``rate`` source (``value``, ``timestamp``) as records of the ``sensors``
    shape; a batch DataFrame of such rows gives the records the stream would."""
    from pyspark.sql import functions as F

    n = F.col("value")
    index = F.pmod(n, F.lit(generator.devices))
    tenant_index = F.pmod(index, F.lit(len(generator.tenants)))
    room_index = F.pmod(F.floor(index / len(generator.tenants)), F.lit(len(ROOMS)))
    tenants = F.array(*[F.lit(t) for t in generator.tenants])
    device = F.format_string("device-%03d", index)
    tenant = F.element_at(tenants, (tenant_index + 1).cast("int"))
    room = F.element_at(F.array(*[F.lit(r) for r in ROOMS]), (room_index + 1).cast("int"))
    temperature, humidity = _climate(n / float(generator.rate), tenant_index, room_index,
                                     generator)  # fmt: skip
    temperature = F.round(temperature + (F.pmod(F.hash(n), F.lit(41)) - 20) / 100.0, 2)
    humidity = F.round(humidity + (F.pmod(F.hash(n, F.lit(3)), F.lit(21)) - 10) / 10.0, 1)
    ts = F.date_format(F.col("timestamp"), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
    reading = F.to_json(
        F.struct(device.alias("device"), tenant.alias("tenant"), room.alias("room"),
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


def _climate(
    seconds: Column, tenant_index: Column, room_index: Column, generator: Generator
) -> tuple[Column, Column]:
    """Temperature and humidity without noise, ``seconds`` after the start, per room."""
    from pyspark.sql import functions as F

    day = duration_seconds(generator.day)
    daylight = F.sin(seconds * (2 * math.pi / day))
    half_day = day / 2
    burst = half_day / 3
    since = seconds - day / 6 - tenant_index * (half_day / len(generator.tenants))
    into = F.pmod(since, F.lit(half_day))
    overheat = F.when((since >= 0) & (into < burst), F.pow(F.sin(into * (math.pi / burst)), 2))
    drift = F.pmod(seconds, F.lit(2.5 * day)) / (2.5 * day)
    temperatures = F.array(
        28.0 + 0.5 * daylight + 5.0 * F.coalesce(overheat, F.lit(0.0)),  # server room
        23.0 + 2.0 * daylight,  # office
        14.0 + 6.0 * drift,  # lab
        10.0 + 2.0 * daylight,  # warehouse
    )
    humidities = F.array(F.lit(30.0), F.lit(45.0), F.lit(40.0), F.lit(65.0))
    position = (room_index + 1).cast("int")
    return (
        F.element_at(temperatures, position),
        F.element_at(humidities, position) - 8.0 * daylight,
    )
