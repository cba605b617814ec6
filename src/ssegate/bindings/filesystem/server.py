"""The ``filesystem`` server binding: files under ``options.location``, read-only, over HTTP.

``serve(rel_path, request, stream)`` answers ``GET`` and ``HEAD`` (anything else is 405 with
``allow: GET, HEAD``) with the file's bytes, ``content-type`` by extension, ``content-length``,
a quoted ``etag`` made of size and modification time, and ``last-modified``. ``if-none-match``
(or, without it, ``if-modified-since``) that still holds is answered 304.

Which paths are served:

- ``rel_path`` is relative to ``location`` and percent-encoded, as on the wire. It is refused
  with 400 when it is absolute, holds a ``.`` or ``..`` segment, an empty segment (``a//b``),
  a backslash, a NUL or another control character, a percent-encoded dot, slash, backslash or
  NUL (``%2e``, ``%2f``, ``%5c``, ``%00``), or is not UTF-8 once decoded.
- An empty path, or one ending in ``/``, means that directory's ``index.html``. There are no
  directory listings: a directory, a device or a pipe is 404, like a missing file.
- ``symlinks: ignore`` (the default): no symbolic link is followed anywhere below
  ``location``. The path is opened one component at a time, each relative to the directory
  opened before it and with ``O_NOFOLLOW``, so a link swapped in while the request runs is
  refused as well. A refused link is answered 404.
- ``symlinks: follow``: links are followed, but only when the fully resolved target lies inside
  the resolved ``location``; a link that leads out is answered 404 and logged as an escape.
  (``location`` itself may be a link: it is configuration, not request input.)

Files up to :data:`CACHEABLE_FILE_SIZE` are kept in a small LRU cache keyed by path and
validated by modification time, size and inode on every request. Larger files are streamed in
chunks, pausing while the response stream holds :data:`SEND_BUFFER_LIMIT` bytes and resuming on
``on_drain``. Every refusal is a log event and a ``ssegate.filesystem.refused`` metric.
"""

from __future__ import annotations

import errno
import mimetypes
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from urllib.parse import unquote_to_bytes

from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.contract.exchange import Request, ResponseStream, simple_response
from ssegate.engine.context import BuildContext
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

CACHEABLE_FILE_SIZE = 256 * 1024
CACHE_TOTAL_SIZE = 16 * 1024 * 1024
CHUNK_SIZE = 64 * 1024
SEND_BUFFER_LIMIT = 256 * 1024
INDEX_FILE = "index.html"

_ENCODED_FORBIDDEN = ("%2e", "%2f", "%5c", "%00")

_TEXT_TYPES = frozenset(
    {"application/javascript", "application/json", "application/manifest+json"}
    | {"application/xml", "image/svg+xml"}
)

# Types the web needs, fixed here because the system's mime.types differs between hosts.
_TYPE_EXTENSIONS = {
    "text/html": "html htm",
    "text/css": "css",
    "text/javascript": "js mjs",
    "application/json": "json map",
    "application/manifest+json": "webmanifest",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "application/xml": "xml",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpg jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/avif": "avif",
    "image/x-icon": "ico",
    "font/woff": "woff",
    "font/woff2": "woff2",
    "font/ttf": "ttf",
    "font/otf": "otf",
    "application/wasm": "wasm",
    "application/pdf": "pdf",
    "video/mp4": "mp4",
    "video/webm": "webm",
    "audio/mpeg": "mp3",
}
CONTENT_TYPES = {
    f".{extension}": kind
    for kind, extensions in _TYPE_EXTENSIONS.items()
    for extension in extensions.split()
}
DEFAULT_CONTENT_TYPE = "application/octet-stream"


def content_type_for(name: str) -> str:
    """The ``content-type`` for a file name, with ``charset=utf-8`` for text types."""
    extension = os.path.splitext(name)[1].lower()
    kind = CONTENT_TYPES.get(extension) or mimetypes.guess_type(name)[0] or DEFAULT_CONTENT_TYPE
    if kind.startswith("text/") or kind in _TEXT_TYPES:
        return f"{kind}; charset=utf-8"
    return kind


class PathRefused(ValueError):
    """A request path that may not be served; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def split_relative_path(raw: str) -> list[str]:
    """Decode a percent-encoded relative path into its segments, or raise :class:`PathRefused`.

    A path that is empty or ends in ``/`` gets :data:`INDEX_FILE` as its last segment.
    """
    if "\x00" in raw or "\\" in raw:
        raise PathRefused("backslash or NUL in path")
    lowered = raw.lower()
    if any(encoded in lowered for encoded in _ENCODED_FORBIDDEN):
        raise PathRefused("percent-encoded dot, slash, backslash or NUL in path")
    if raw.startswith("/"):
        raise PathRefused("absolute path")
    try:
        decoded = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise PathRefused("path is not UTF-8") from None
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in decoded):
        raise PathRefused("control character in path")
    segments = decoded.split("/") if decoded else [""]
    if segments[-1] == "":
        segments[-1] = INDEX_FILE
    for segment in segments:
        if segment in (".", ".."):
            raise PathRefused("dot segment in path")
        if segment == "":
            raise PathRefused("empty segment in path")
    return segments


class _NotServed(Exception):
    """Why a path could not be opened: an HTTP status, and a refusal reason if it is one."""

    def __init__(self, status: int, refusal: str | None = None) -> None:
        super().__init__(status, refusal)
        self.status = status
        self.refusal = refusal


@dataclass(frozen=True, slots=True)
class _CacheEntry:
    stamp: tuple[int, int, int]
    data: bytes


class FileCache:
    """Small files by path, each valid while its (mtime, size, inode) stamp is unchanged."""

    def __init__(self, max_file: int = CACHEABLE_FILE_SIZE, max_total: int = CACHE_TOTAL_SIZE):
        self.max_file = max_file
        self.max_total = max_total
        self.total = 0
        self._entries: OrderedDict[str, _CacheEntry] = OrderedDict()

    def get(self, path: str, stamp: tuple[int, int, int]) -> bytes | None:
        entry = self._entries.get(path)
        if entry is None or entry.stamp != stamp:
            return None
        self._entries.move_to_end(path)
        return entry.data

    def put(self, path: str, stamp: tuple[int, int, int], data: bytes) -> None:
        if len(data) > self.max_file:
            return
        old = self._entries.pop(path, None)
        if old is not None:
            self.total -= len(old.data)
        self._entries[path] = _CacheEntry(stamp, data)
        self.total += len(data)
        while self.total > self.max_total:
            _, evicted = self._entries.popitem(last=False)
            self.total -= len(evicted.data)

    def __len__(self) -> int:
        return len(self._entries)


def _etag(info: os.stat_result) -> str:
    return f'"{info.st_size:x}-{info.st_mtime_ns:x}"'


def _etag_matches(header: str, etag: str) -> bool:
    """``if-none-match`` comparison: weak, over a comma-separated list, ``*`` matches all."""
    for candidate in header.split(","):
        tag = candidate.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False


def _not_modified_since(header: str, info: os.stat_result) -> bool:
    try:
        since = parsedate_to_datetime(header)
    except (TypeError, ValueError, IndexError):
        return False
    if since.tzinfo is None:
        return False
    return int(info.st_mtime) <= since.timestamp()


class FilesystemServer:
    """Serves files below one directory (see the module docstring for the rules)."""

    def __init__(
        self,
        name: str,
        location: str,
        *,
        follow_symlinks: bool = False,
        metrics: Metrics | None = None,
        cache: FileCache | None = None,
    ) -> None:
        self.name = name
        self.location = location
        self.follow_symlinks = follow_symlinks
        self.metrics = metrics or Metrics()
        self.cache = cache or FileCache()

    def handle(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        """Serve ``request.path`` (its leading ``/`` dropped) directly."""
        path = request.path
        self.serve(path[1:] if path.startswith("/") else path, request, stream)

    def serve(self, rel_path: str, request: Request, stream: ResponseStream) -> None:
        """Answer ``request`` with the file at ``rel_path`` (percent-encoded, relative)."""
        if request.method not in ("GET", "HEAD"):
            self._answer(stream, 405, b"", [("allow", "GET, HEAD")])
            return
        try:
            segments = split_relative_path(rel_path)
        except PathRefused as refused:
            self._refuse(request, rel_path, "path", refused.reason)
            self._answer(stream, 400, f"{refused.reason}\n".encode())
            return
        try:
            fd, info = self._open(segments)
        except _NotServed as failure:
            if failure.refusal is not None:
                self._refuse(request, rel_path, failure.refusal, failure.refusal)
            else:
                log.event("filesystem.not_found", binding=self.name, path=rel_path)
            self._answer(stream, failure.status, b"")
            return
        try:
            self._respond(fd, info, "/".join(segments), request, stream)
        except OSError as failure:
            # Only reading a small file raises here, after it closed its descriptor and
            # before any header was sent.
            log.error("filesystem.read_failed", binding=self.name, path=rel_path, error=failure)
            self.metrics.inc("ssegate.filesystem.read_errors", self.name)
            self._answer(stream, 500, b"the file could not be read\n")

    # -- opening -----------------------------------------------------------------------------

    def _open(self, segments: list[str]) -> tuple[int, os.stat_result]:
        opener = self._open_following if self.follow_symlinks else self._open_beneath
        fd = opener(segments)
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise _NotServed(404) from None
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise _NotServed(404)
        return fd, info

    def _open_beneath(self, segments: list[str]) -> int:
        """Open without following any link, one component at a time."""
        try:
            directory = os.open(self.location, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            raise _NotServed(404) from None
        try:
            for index, segment in enumerate(segments):
                last = index == len(segments) - 1
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
                flags |= os.O_NONBLOCK if last else os.O_DIRECTORY
                try:
                    opened = os.open(segment, flags, dir_fd=directory)
                except OSError as failure:
                    raise self._classify(failure, segment, directory) from None
                if last:
                    return opened
                os.close(directory)
                directory = opened
        finally:
            os.close(directory)
        raise _NotServed(404)  # pragma: no cover - segments is never empty

    @staticmethod
    def _classify(failure: OSError, segment: str, directory: int) -> _NotServed:
        if failure.errno in (errno.EACCES, errno.EPERM):
            return _NotServed(403, "permission")
        try:
            if stat.S_ISLNK(os.lstat(segment, dir_fd=directory).st_mode):
                return _NotServed(404, "symlink")
        except OSError:
            pass
        return _NotServed(404)

    def _open_following(self, segments: list[str]) -> int:
        """Follow links, but only to targets inside the resolved location."""
        root = os.path.realpath(self.location)
        target = os.path.realpath(os.path.join(root, *segments))
        if os.path.commonpath([root, target]) != root:
            raise _NotServed(404, "escape")
        try:
            return os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as failure:
            if failure.errno in (errno.EACCES, errno.EPERM):
                raise _NotServed(403, "permission") from None
            raise _NotServed(404) from None

    # -- answering ---------------------------------------------------------------------------

    def _respond(
        self,
        fd: int,
        info: os.stat_result,
        relative: str,
        request: Request,
        stream: ResponseStream,
    ) -> None:
        etag = _etag(info)
        validators = [("etag", etag), ("last-modified", formatdate(info.st_mtime, usegmt=True))]
        if self._not_modified(request, etag, info):
            os.close(fd)
            self._count(304)
            stream.send_headers(304, validators, end=True)
            return
        headers = [
            ("content-type", content_type_for(relative)),
            ("content-length", str(info.st_size)),
            *validators,
            ("x-content-type-options", "nosniff"),
        ]
        if request.method == "HEAD" or info.st_size == 0:
            os.close(fd)
            self._count(200)
            stream.send_headers(200, headers, end=True)
            return
        if info.st_size <= self.cache.max_file:
            data = self._read_small(fd, info, os.path.join(self.location, relative))
            headers[1] = ("content-length", str(len(data)))
            self._count(200)
            stream.send_headers(200, headers)
            stream.send_data(data, end=True)
            return
        self._count(200)
        stream.send_headers(200, headers)
        _FileTransfer(self, fd, info.st_size, stream).start()

    @staticmethod
    def _not_modified(request: Request, etag: str, info: os.stat_result) -> bool:
        if_none_match = request.headers.get("if-none-match")
        if if_none_match is not None:
            return _etag_matches(if_none_match, etag)
        if_modified_since = request.headers.get("if-modified-since")
        return if_modified_since is not None and _not_modified_since(if_modified_since, info)

    def _read_small(self, fd: int, info: os.stat_result, key: str) -> bytes:
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        try:
            cached = self.cache.get(key, stamp)
            if cached is not None:
                return cached
            parts: list[bytes] = []
            remaining = info.st_size
            while remaining > 0:
                chunk = os.read(fd, remaining)
                if not chunk:
                    break
                parts.append(chunk)
                remaining -= len(chunk)
        finally:
            os.close(fd)
        data = b"".join(parts)
        if len(data) == info.st_size:
            self.cache.put(key, stamp, data)
        return data

    def _answer(
        self,
        stream: ResponseStream,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        self._count(status)
        simple_response(stream, status, body, headers)

    def _count(self, status: int) -> None:
        self.metrics.inc("ssegate.filesystem.responses", self.name, status=str(status))

    def _refuse(self, request: Request, path: str, reason: str, detail: str) -> None:
        self.metrics.inc("ssegate.filesystem.refused", self.name, reason=reason)
        log.warning(
            "filesystem.refused",
            binding=self.name,
            reason=reason,
            detail=detail,
            path=path,
            remote=request.remote,
        )


class _FileTransfer:
    """Streams one large file, pausing while the response stream's buffer is full."""

    def __init__(self, server: FilesystemServer, fd: int, size: int, stream: ResponseStream):
        self.server = server
        self.fd: int | None = fd
        self.offset = 0
        self.size = size
        self.stream = stream

    def start(self) -> None:
        self.stream.on_close(self._close)
        self.stream.on_drain(self._pump)
        self._pump()

    def _pump(self) -> None:
        fd = self.fd
        if fd is None:
            return
        stream = self.stream
        try:
            while not stream.closed and stream.buffered < SEND_BUFFER_LIMIT:
                chunk = os.pread(fd, min(CHUNK_SIZE, self.size - self.offset), self.offset)
                if not chunk:
                    raise OSError(errno.EIO, "file shrank while it was being sent")
                self.offset += len(chunk)
                done = self.offset >= self.size
                stream.send_data(chunk, end=done)
                if done:
                    break
        except OSError as failure:
            log.error("filesystem.read_failed", binding=self.server.name, error=failure)
            self.server.metrics.inc("ssegate.filesystem.read_errors", self.server.name)
            self._close()
            if not stream.closed:
                stream.reset()
            return
        if stream.closed or self.offset >= self.size:
            self._close()

    def _close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def build(binding: Binding, ctx: BuildContext) -> FilesystemServer:
    options = binding.options
    location = options["location"]
    if not location:  # the schema requires a string, and takes the empty one
        raise ConfigError(f"{binding.path}.options.location", "a filesystem server needs one")
    symlinks = options.get("symlinks", "ignore")
    resolved = ctx.resolve_path(location)
    if not os.path.isdir(resolved):
        log.warning("filesystem.location_missing", binding=binding.name, location=resolved)
    return FilesystemServer(
        binding.name, resolved, follow_symlinks=symlinks == "follow", metrics=ctx.metrics
    )
