"""The filesystem server on real directories: files, validators, escapes and symlinks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.filesystem.server import (
    CACHEABLE_FILE_SIZE,
    SEND_BUFFER_LIMIT,
    FileCache,
    FilesystemServer,
    PathRefused,
    build,
    content_type_for,
    split_relative_path,
)
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Config
from ssegate.contract.exchange import DirectSocket, Request
from ssegate.telemetry.metrics import Metrics


class RecordingStream:
    """A response stream that keeps what was sent; ``flush`` plays the kernel taking bytes."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.ended = False
        self.was_reset = False
        self._buffered = 0
        self._drain: list[Callable[[], None]] = []
        self._close: list[Callable[[], None]] = []

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        assert self.status is None, "headers sent twice"
        self.status = status
        self.headers = dict(headers)
        if end:
            self._finish()

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        assert self.status is not None and not self.ended
        self.body += data
        self._buffered += len(data)
        if end:
            self._finish()

    def reset(self) -> None:
        self.was_reset = True
        self._finish()

    @property
    def buffered(self) -> int:
        return self._buffered

    @property
    def closed(self) -> bool:
        return self.ended or self.was_reset

    def on_close(self, callback: Callable[[], None]) -> None:
        self._close.append(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        self._drain.append(callback)

    def direct_socket(self) -> DirectSocket | None:
        return None

    def flush(self) -> None:
        self._buffered = 0
        for callback in list(self._drain):
            callback()

    def _finish(self) -> None:
        if not (self.ended or self.was_reset):
            self.ended = True
            for callback in self._close:
                callback()


def _request(target: str, method: str = "GET", **headers: str) -> Request:
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    return Request(method, "https", "localhost:7143", target, named, remote="127.0.0.1:5000")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    www = tmp_path / "www"
    (www / "css").mkdir(parents=True)
    (www / "index.html").write_text("<!doctype html><p>hi</p>\n")
    (www / "app.js").write_text("console.log('ok')\n")
    (www / "css" / "app.css").write_text("p{}\n")
    (www / "css" / "index.html").write_text("css index\n")
    (www / "data.bin").write_bytes(b"\x00\x01")
    (www / "empty.txt").write_bytes(b"")
    (www / "my file.txt").write_text("spaced\n")
    (tmp_path / "secret.txt").write_text("do not serve\n")
    return www


def _server(location: Path, *, follow: bool = False) -> FilesystemServer:
    return FilesystemServer("east_filesystem_server", str(location), follow_symlinks=follow)


def _get(server: FilesystemServer, target: str, method: str = "GET", **headers: str) -> Any:
    stream = RecordingStream()
    server.handle(_request(target, method, **headers), b"", stream)
    return stream


# -- files ------------------------------------------------------------------------------------


def test_a_file_is_served_with_type_length_and_validators(site: Path) -> None:
    stream = _get(_server(site), "/index.html")
    assert stream.status == 200 and stream.ended
    assert bytes(stream.body) == b"<!doctype html><p>hi</p>\n"
    assert stream.headers["content-type"] == "text/html; charset=utf-8"
    assert stream.headers["content-length"] == str(len(stream.body))
    assert stream.headers["etag"].startswith('"') and stream.headers["etag"].endswith('"')
    assert stream.headers["last-modified"].endswith(" GMT")


def test_nested_paths_and_percent_encoded_names_are_served(site: Path) -> None:
    assert bytes(_get(_server(site), "/css/app.css").body) == b"p{}\n"
    assert bytes(_get(_server(site), "/my%20file.txt").body) == b"spaced\n"


def test_the_query_string_is_not_part_of_the_file_name(site: Path) -> None:
    assert _get(_server(site), "/app.js?v=3").status == 200


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("index.html", "text/html; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("x.mjs", "text/javascript; charset=utf-8"),
        ("style.CSS", "text/css; charset=utf-8"),
        ("data.json", "application/json; charset=utf-8"),
        ("logo.svg", "image/svg+xml; charset=utf-8"),
        ("logo.png", "image/png"),
        ("font.woff2", "font/woff2"),
        ("module.wasm", "application/wasm"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("blob", "application/octet-stream"),
    ],
)
def test_content_type_by_extension(name: str, expected: str) -> None:
    assert content_type_for(name) == expected


def test_head_sends_the_headers_without_a_body(site: Path) -> None:
    stream = _get(_server(site), "/app.js", "HEAD")
    assert stream.status == 200 and stream.ended
    assert stream.body == b""
    assert stream.headers["content-length"] == str(len("console.log('ok')\n"))


def test_an_empty_file_is_200_with_length_0(site: Path) -> None:
    stream = _get(_server(site), "/empty.txt")
    assert (stream.status, stream.headers["content-length"], stream.ended) == (200, "0", True)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_other_methods_are_405_with_allow(site: Path, method: str) -> None:
    stream = _get(_server(site), "/index.html", method)
    assert stream.status == 405
    assert stream.headers["allow"] == "GET, HEAD"


# -- validators -------------------------------------------------------------------------------


def test_matching_if_none_match_is_304_without_a_body(site: Path) -> None:
    server = _server(site)
    etag = _get(server, "/index.html").headers["etag"]
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = _get(server, "/index.html", if_none_match=header)
        assert again.status == 304 and again.body == b"" and again.ended
        assert again.headers["etag"] == etag


def test_a_changed_file_gets_a_new_etag_and_a_full_answer(site: Path) -> None:
    server = _server(site)
    etag = _get(server, "/index.html").headers["etag"]
    (site / "index.html").write_text("changed and longer\n")
    again = _get(server, "/index.html", if_none_match=etag)
    assert again.status == 200
    assert bytes(again.body) == b"changed and longer\n"
    assert again.headers["etag"] != etag


def test_if_modified_since_is_used_when_there_is_no_if_none_match(site: Path) -> None:
    server = _server(site)
    modified = _get(server, "/index.html").headers["last-modified"]
    assert _get(server, "/index.html", if_modified_since=modified).status == 304
    old = "Mon, 01 Jan 2001 00:00:00 GMT"
    assert _get(server, "/index.html", if_modified_since=old).status == 200
    assert _get(server, "/index.html", if_modified_since="garbage").status == 200
    both = _get(server, "/index.html", if_none_match='"nope"', if_modified_since=modified)
    assert both.status == 200


# -- directories ------------------------------------------------------------------------------


def test_missing_files_and_directories_are_404_without_listing(site: Path) -> None:
    server = _server(site)
    assert _get(server, "/missing.html").status == 404
    assert _get(server, "/css").status == 404
    assert _get(server, "/css/missing/deeper").status == 404
    assert _get(server, "/index.html/x").status == 404
    assert (
        server.metrics.counter(
            "ssegate.filesystem.responses", "east_filesystem_server", status="404"
        )
        == 4
    )


def test_a_path_ending_in_slash_serves_that_directory_index(site: Path) -> None:
    server = _server(site)
    assert bytes(_get(server, "/").body) == b"<!doctype html><p>hi</p>\n"
    assert bytes(_get(server, "/css/").body) == b"css index\n"
    (site / "css" / "index.html").unlink()
    assert _get(server, "/css/").status == 404


def test_a_fifo_is_not_served(site: Path) -> None:
    os.mkfifo(site / "pipe")
    assert _get(_server(site), "/pipe").status == 404


def test_a_missing_location_answers_404(tmp_path: Path) -> None:
    assert _get(_server(tmp_path / "nowhere"), "/index.html").status == 404


# -- escapes ----------------------------------------------------------------------------------

ESCAPES = [
    ("../secret.txt", "dot segment in path"),
    ("css/../../secret.txt", "dot segment in path"),
    ("./index.html", "dot segment in path"),
    ("%2e%2e/secret.txt", "percent-encoded dot, slash, backslash or NUL in path"),
    ("%2E%2E/secret.txt", "percent-encoded dot, slash, backslash or NUL in path"),
    (".%2e/secret.txt", "percent-encoded dot, slash, backslash or NUL in path"),
    ("..%2fsecret.txt", "percent-encoded dot, slash, backslash or NUL in path"),
    ("css%2F..%2F..%2Fsecret.txt", "percent-encoded dot, slash, backslash or NUL in path"),
    ("..%5csecret.txt", "percent-encoded dot, slash, backslash or NUL in path"),
    ("index.html%00.png", "percent-encoded dot, slash, backslash or NUL in path"),
    ("..\\secret.txt", "backslash or NUL in path"),
    ("index.html\x00", "backslash or NUL in path"),
    ("/etc/passwd", "absolute path"),
    ("css//app.css", "empty segment in path"),
    ("%ff%fe", "path is not UTF-8"),
    ("a%0Ab", "control character in path"),
]


@pytest.mark.parametrize(("raw", "reason"), ESCAPES)
def test_escape_attempts_are_refused_by_the_path_rules(raw: str, reason: str) -> None:
    with pytest.raises(PathRefused) as caught:
        split_relative_path(raw)
    assert caught.value.reason == reason


@pytest.mark.parametrize(("raw", "reason"), ESCAPES)
def test_escape_attempts_are_answered_400_and_counted(site: Path, raw: str, reason: str) -> None:
    server = _server(site)
    stream = RecordingStream()
    server.serve(raw, _request("/x"), stream)
    assert stream.status == 400
    assert bytes(stream.body) == f"{reason}\n".encode()
    assert b"do not serve" not in stream.body
    assert (
        server.metrics.counter(
            "ssegate.filesystem.refused", "east_filesystem_server", reason="path"
        )
        == 1
    )


def test_a_doubly_encoded_dot_is_only_a_strange_file_name(site: Path) -> None:
    assert split_relative_path("%252e%252e/secret.txt") == ["%2e%2e", "secret.txt"]
    assert _get(_server(site), "/%252e%252e/secret.txt").status == 404


def test_a_leading_double_slash_is_an_absolute_path(site: Path) -> None:
    assert _get(_server(site), "//etc/passwd").status == 400


# -- symlinks ---------------------------------------------------------------------------------


@pytest.fixture
def linked(site: Path) -> Path:
    (site / "inside-link.js").symlink_to(site / "app.js")
    (site / "outside-link.txt").symlink_to(site.parent / "secret.txt")
    (site / "linked-dir").symlink_to(site / "css")
    (site / "outside-dir").symlink_to(site.parent)
    (site / "dangling").symlink_to(site / "nothing")
    return site


@pytest.mark.parametrize(
    "target",
    [
        "/inside-link.js",
        "/outside-link.txt",
        "/linked-dir/app.css",
        "/outside-dir/secret.txt",
        "/dangling",
    ],
)
def test_ignore_mode_refuses_every_symlink_with_404(linked: Path, target: str) -> None:
    server = _server(linked)
    stream = _get(server, target)
    assert stream.status == 404
    assert b"do not serve" not in stream.body
    assert (
        server.metrics.counter(
            "ssegate.filesystem.refused", "east_filesystem_server", reason="symlink"
        )
        == 1
    )


def test_follow_mode_serves_links_that_stay_inside_location(linked: Path) -> None:
    server = _server(linked, follow=True)
    assert bytes(_get(server, "/inside-link.js").body) == b"console.log('ok')\n"
    assert bytes(_get(server, "/linked-dir/app.css").body) == b"p{}\n"
    assert _get(server, "/dangling").status == 404


@pytest.mark.parametrize("target", ["/outside-link.txt", "/outside-dir/secret.txt"])
def test_follow_mode_refuses_links_that_lead_out_of_location(linked: Path, target: str) -> None:
    server = _server(linked, follow=True)
    stream = _get(server, target)
    assert stream.status == 404
    assert b"do not serve" not in stream.body
    assert (
        server.metrics.counter(
            "ssegate.filesystem.refused", "east_filesystem_server", reason="escape"
        )
        == 1
    )


def test_a_symlinked_location_is_itself_allowed(site: Path, tmp_path: Path) -> None:
    (tmp_path / "www-link").symlink_to(site)
    assert _get(_server(tmp_path / "www-link"), "/index.html").status == 200
    assert _get(_server(tmp_path / "www-link", follow=True), "/index.html").status == 200


# -- cache and large files --------------------------------------------------------------------


def test_small_files_are_cached_until_they_change(site: Path) -> None:
    server = _server(site)
    _get(server, "/index.html")
    _get(server, "/index.html")
    assert len(server.cache) == 1
    (site / "index.html").write_text("new\n")
    assert bytes(_get(server, "/index.html").body) == b"new\n"


def test_the_cache_stays_within_its_total_size() -> None:
    cache = FileCache(max_file=4, max_total=10)
    for name in "abcd":
        cache.put(name, (1, 4, 1), b"1234")
    assert cache.total <= 10
    assert cache.get("a", (1, 4, 1)) is None
    assert cache.get("d", (1, 4, 1)) == b"1234"
    assert cache.get("d", (2, 4, 1)) is None
    cache.put("big", (1, 5, 1), b"12345")
    assert cache.get("big", (1, 5, 1)) is None


def test_a_large_file_is_sent_in_chunks_as_the_stream_drains(site: Path) -> None:
    content = bytes(range(256)) * ((CACHEABLE_FILE_SIZE * 3) // 256 + 7)
    (site / "big.bin").write_bytes(content)
    server = _server(site)
    stream = _get(server, "/big.bin")
    assert stream.status == 200
    assert stream.headers["content-length"] == str(len(content))
    rounds = 0
    while not stream.ended:
        assert stream.buffered >= SEND_BUFFER_LIMIT, "stopped before the buffer was full"
        stream.flush()
        rounds += 1
        assert rounds < 100
    assert rounds >= 2
    assert bytes(stream.body) == content
    assert len(server.cache) == 0


def test_a_large_file_that_shrinks_mid_transfer_resets_the_stream(site: Path) -> None:
    path = site / "big.bin"
    path.write_bytes(b"x" * (SEND_BUFFER_LIMIT * 3))
    server = _server(site)
    stream = _get(server, "/big.bin")
    assert not stream.ended
    path.write_bytes(b"short")
    stream.flush()
    assert stream.was_reset
    assert server.metrics.counter("ssegate.filesystem.read_errors", "east_filesystem_server") == 1


def test_a_client_that_goes_away_stops_the_transfer(site: Path) -> None:
    (site / "big.bin").write_bytes(b"x" * (SEND_BUFFER_LIMIT * 3))
    stream = _get(_server(site), "/big.bin")
    sent = len(stream.body)
    stream.reset()
    stream.flush()
    assert len(stream.body) == sent


# -- build ------------------------------------------------------------------------------------


class Context:
    def __init__(self, base: Path) -> None:
        self.metrics = Metrics()
        self.base = base
        self.config = Config(name="test", bindings={})

    def resolve_path(self, path: str) -> str:
        return str(self.base / path)


def _binding(**options: Any) -> Binding:
    return Binding("east_filesystem_server", "filesystem", "server", options=options)


def test_build_resolves_location_against_the_config_directory(site: Path) -> None:
    server = build(_binding(location="www/"), Context(site.parent))  # type: ignore[arg-type]
    assert server.location == str(site.parent / "www/")
    assert not server.follow_symlinks
    follow = build(
        _binding(location="www", symlinks="follow"),
        Context(site.parent),  # type: ignore[arg-type]
    )
    assert follow.follow_symlinks


def test_build_refuses_an_empty_location(site: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        build(_binding(location=""), Context(site.parent))  # type: ignore[arg-type]
    assert str(caught.value) == (
        "bindings.east_filesystem_server.options.location: a filesystem server needs one"
    )


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({}, "location: required but missing"),
        (
            {"location": "www", "symlinks": "maybe"},
            "symlinks: 'maybe' is not one of ['follow', 'ignore']",
        ),
    ],
)
def test_the_schema_refuses_bad_options(options: dict[str, Any], error: str) -> None:
    errors = binding_errors("east_filesystem_server", "filesystem", "server", options=options)
    assert errors == [f"bindings.east_filesystem_server.options.{error}"]
