"""The Spark session a pipeline runs in, with Spark's official Kafka connector on its classpath.

Spark's Kafka connector (``spark-sql-kafka-0-10``) and its Avro functions (``spark-avro``:
``from_avro``) are not part of pyspark: :func:`connector_jars` resolves them from Maven Central
once, for the exact version of the installed pyspark, into
``<cache root>/spark-connectors-<version>/lib`` (the same Maven path the local broker's jars take;
``./run`` does it in its setup step ``spark-connector``), and :func:`spark_session` hands those
jars to Spark with ``spark.jars`` before the JVM starts.

Python workers run the interpreter running this code (``PYSPARK_PYTHON``, unless set). On a
cluster (any master but ``local``) they also get this process's ``ssegate`` package as a zip
(:func:`package_archive`, ``addPyFile``), which goes before the executors' own ``sys.path``: the
executors run the driver's code, and need only its dependencies installed. A master on
127.0.0.1 or localhost keeps the driver on loopback too.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ssegate.cache import cache_root
from ssegate.jars import ensure_maven_jars
from ssegate.telemetry.log import event

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SETUP_STEP = "spark-connector"
CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
    "spark-avro_2.13",
)

# What a small machine needs; a cluster's own defaults take over for what is not set here.
LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
    "spark.sql.adaptive.enabled": "false",  # not used by streaming queries; avoids a warning
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
}


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def connector_jars(cache_dir: Path | None = None) -> list[Path]:
    """The connector's jars for the installed pyspark, resolved with Maven the first time."""
    version = spark_version()
    lib = ensure_maven_jars(
        (cache_dir or cache_root()) / f"spark-connectors-{version}",
        resources.files(__package__).joinpath("connector-pom.xml").read_bytes(),
        [f"-Dspark.version={version}", f"-DincludeArtifactIds={','.join(CONNECTOR_ARTIFACTS)}"],
        expected="spark-sql-kafka-0-10_2.13-*.jar",
        marker=f"spark {version}\n",
        step=SETUP_STEP,
        what=f"Spark {version}'s Kafka connector and Avro jars",
    )
    return sorted(lib.glob("*.jar"))


def spark_session(
    master: str = "local[2]",
    app_name: str = "ssegate-pipeline",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or join) the process's Spark session with the Kafka connector on its classpath.

    ``conf`` adds or replaces Spark settings; :data:`LOCAL_DEFAULTS` apply first.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local") or _on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = connector_jars()
    started = time.monotonic()
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**LOCAL_DEFAULTS, "spark.jars": ",".join(str(jar) for jar in jars), **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    if not master.startswith("local"):
        session.sparkContext.addPyFile(str(package_archive()))
    event("pipeline.spark.started", master=master, version=session.version,
          seconds=round(time.monotonic() - started, 2))  # fmt: skip
    return session


@functools.cache
def package_archive() -> Path:
    """This process's ``ssegate`` package as a zip (sources and data files), made once and
    removed when the process exits."""
    import ssegate

    package = Path(ssegate.__file__).parent
    folder = Path(tempfile.mkdtemp(prefix="ssegate-pyfiles-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    archive_path = folder / "ssegate.zip"
    with zipfile.ZipFile(archive_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(package.parent))
    return archive_path


def _on_loopback(master: str) -> bool:
    host = master.removeprefix("spark://").split(",")[0].rsplit(":", 1)[0]
    return master.startswith("spark://") and host in ("127.0.0.1", "localhost")
