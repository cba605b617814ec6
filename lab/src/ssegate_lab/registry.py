"""A real Apicurio Registry on loopback, built from Maven Central, for integration tests.

Central holds Apicurio's application module but no runnable jar, so :func:`ensure_registry_jar`
builds one: it fetches the app module, puts its ``application.properties`` (in-memory H2
storage by default) into a small project next to the shipped pom, and runs the Quarkus build
step. The result lives in ``<cache root>/apicurio-<version>``; a marker makes later calls free.
``./run`` builds it in its setup step ``registry``; offline (``$SSEGATE_OFFLINE``, as in the
tests) a missing build is a :class:`~ssegate.cache.NotPrepared` error, never a build.
:class:`ApicurioServer` runs it (``java -jar``) and waits until it answers. It serves its own
API at ``/apis/registry/v2`` and the Confluent one at ``/apis/ccompat/v7``.
"""

from __future__ import annotations

import fcntl
import subprocess
import time
import urllib.request
import zipfile
from importlib import resources
from pathlib import Path

from ssegate.cache import cache_root, refuse_when_offline

SETUP_STEP = "registry"
REGISTRY_VERSION = "2.4.2.Final"
QUARKUS_VERSION = "2.16.4.Final"
_MARKER = ".built"
_MAVEN_TIMEOUT = 1200.0


class RegistryError(RuntimeError):
    """The registry could not be built or did not start."""


def ensure_registry_jar(cache_dir: Path | None = None) -> Path:
    home = (cache_dir or cache_root()) / f"apicurio-{REGISTRY_VERSION}"
    jar = home / "target" / "apicurio-runner-1-runner.jar"
    if (home / _MARKER).is_file():
        return jar
    refuse_when_offline(SETUP_STEP, f"the Apicurio registry {REGISTRY_VERSION} jar", home)
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / _MARKER).is_file():
            _build(home)
            (home / _MARKER).write_text("ok\n")
    return jar


def _mvn(home: Path, *args: str) -> None:
    command = ["mvn", "-q", "-B", "-s", str(home / "settings.xml"), "-f", str(home / "pom.xml")]
    command += [*args, f"-Dregistry.version={REGISTRY_VERSION}"]
    command += [f"-Dregistry.quarkus.version={QUARKUS_VERSION}"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT, check=False
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise RegistryError(f"`{' '.join(command)}` failed (exit {done.returncode}):\n{tail}")


def _build(home: Path) -> None:
    package = resources.files(__package__)
    (home / "pom.xml").write_bytes(package.joinpath("apicurio-pom.xml").read_bytes())
    (home / "settings.xml").write_bytes(package.joinpath("apicurio-settings.xml").read_bytes())
    app = home / "app"
    artifact = f"io.apicurio:apicurio-registry-app:{REGISTRY_VERSION}"
    _mvn(home, "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={app}")
    resources_dir = home / "src" / "main" / "resources"
    resources_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(app / f"apicurio-registry-app-{REGISTRY_VERSION}.jar") as jar:
        properties = jar.read("application.properties")
    properties += (
        b"\nquarkus.index-dependency.registryapp.group-id=io.apicurio"
        b"\nquarkus.index-dependency.registryapp.artifact-id=apicurio-registry-app\n"
    )
    (resources_dir / "application.properties").write_bytes(properties)
    _mvn(home, "package", "-DskipTests")


class ApicurioServer:
    """``java -jar`` of the built registry on ``127.0.0.1:port`` (in-memory storage)."""

    def __init__(self, jar: Path, port: int, log_path: Path) -> None:
        self.jar = jar
        self.port = port
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    "java", "-Xmx384m", "-XX:TieredStopAtLevel=1",
                    f"-Dquarkus.http.port={self.port}", "-Dquarkus.http.host=127.0.0.1",
                    "-jar", str(self.jar),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.url}/apis/registry/v2/system/info", timeout=1):
                    return
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RegistryError(
            f"the registry did not answer within {timeout:.0f} s; see {self.log_path}"
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
