"""HTTP/1.1 requests from a hostile client, into a real gateway's port over a socket.

The gateway runs in this process (its runtime on a uvloop of its own thread, built from a
``zilla.yaml``): a plain tcp listener, the http server with CORS, a jwt guard reading bearer
tokens from a header, a query parameter and a cookie, ``options.requests`` rules, and routes to
a filesystem. Each example writes bytes in arbitrary pieces, shuts its side, and reads until the
gateway closes: the answer must begin with an HTTP/1.1 status line, or be nothing (a close);
and no error or traceback may be logged meanwhile. The bytes are request heads built from the
pieces that matter (methods, targets, versions, framing and auth headers, tokens with
arbitrary JSON in them, bare CR and LF, pipelined requests), and arbitrary bytes; and h2c
upgrades whose ``HTTP2-Settings`` carry arbitrary settings.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop
from hypothesis import assume, example, given
from hypothesis import strategies as st

from ssegate.config.loader import load_config_text
from ssegate.engine.runtime import Runtime, free_port
from ssegate.guards.jwt import b64url_encode
from ssegate.tools.token import encode_token, generate_key, public_jwk

from .profiles import FUZZ, cuts

KEY = generate_key("ec")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STATUS_LINE = re.compile(rb"HTTP/1\.1 [1-5][0-9][0-9] ")

CONFIG = """\
name: http1-fuzz
guards:
  authn_jwt:
    type: jwt
    options:
      keys: @KEYS@
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {host: 127.0.0.1, port: @PORT@}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      access-control:
        policy: cross-origin
        allow:
          origins: [https://app.example.com]
          methods: [GET, POST]
          headers: [last-event-id, x-tenant]
          credentials: true
      authorization:
        authn_jwt:
          credentials:
            headers: {authorization: "Bearer {credentials}"}
            query: {access_token: "{credentials}"}
            cookies: {session: "{credentials}"}
      requests:
        - path: /files/{name}
          method: GET
          headers:
            x-tenant: {model: string, pattern: "[a-z]+"}
          params:
            query:
              limit: {model: string, pattern: "[0-9]{1,3}"}
    routes:
      - when:
          - headers: {":path": "/private/*"}
        guarded:
          authn_jwt: [read]
        exit: east_http_filesystem
      - when:
          - headers: {":path": "/files/*"}
          - headers: {":path": "/index.html"}
        exit: east_http_filesystem
  east_http_filesystem:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /{path}
        with:
          path: ${params.path}
        exit: east_filesystem_server
  east_filesystem_server:
    type: filesystem
    kind: server
    options:
      location: www/
"""


class LoggedProblems(logging.Handler):
    """Every error or traceback logged anywhere in the process, formatted."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.lines.append(logging.Formatter().format(record))


class Gateway:
    """A gateway runtime serving ``config_text`` on a uvloop in a thread of its own."""

    def __init__(self, config_text: str, base_dir: Path) -> None:
        self.config = load_config_text(config_text, base_dir=str(base_dir))
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runtime = Runtime(self.config)

    def __enter__(self) -> Gateway:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.runtime.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runtime.stop(1.0), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, LoggedProblems]]:
    root = tmp_path_factory.mktemp("http1-fuzz")
    (root / "www" / "files").mkdir(parents=True)
    (root / "www" / "private").mkdir()
    (root / "www" / "index.html").write_text("<p>index</p>\n")
    (root / "www" / "files" / "notes.txt").write_text("notes\n")
    (root / "www" / "private" / "report.txt").write_text("report\n")
    port = free_port()
    text = CONFIG.replace("@KEYS@", json.dumps([public_jwk(KEY, "ec")])).replace(
        "@PORT@", str(port)
    )
    problems = LoggedProblems()
    logging.getLogger().addHandler(problems)
    try:
        with Gateway(text, root):
            yield port, problems
    finally:
        logging.getLogger().removeHandler(problems)


def _token(header: object, claims: object) -> str:
    head = b64url_encode(json.dumps(header, ensure_ascii=False).encode())
    body = b64url_encode(json.dumps(claims, ensure_ascii=False).encode())
    return f"{head}.{body}.AAAA"


SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=6)
TOKENS = st.one_of(
    st.just(encode_token(KEY, {"sub": "alice", "scope": "read", "exp": 4102444800}, kid="ec")),
    st.builds(
        _token,
        st.fixed_dictionaries({"alg": st.sampled_from(["ES256", "none", "HS256"]) | SCALARS,
                               "kid": st.sampled_from(["ec", "中", "é\"\\"]) | SCALARS}),
        st.dictionaries(st.sampled_from(["sub", "exp", "scope", "aud"]), SCALARS),
    ),
    st.text(max_size=12),
)  # fmt: skip


def _mostly(common: list[str], rare: list[str], size: int) -> st.SearchStrategy[str]:
    """One of ``common`` about half the time, else one of ``rare`` or arbitrary text."""
    return st.one_of(st.sampled_from(common), st.sampled_from(rare) | st.text(max_size=size))


METHODS = _mostly(
    ["GET", "POST", "OPTIONS"], ["HEAD", "PUT", "TRACE", "CONNECT", "PRI", "get", ""], 6
)
TARGETS = _mostly(
    ["/index.html", "/files/notes.txt?limit=5", "/private/report.txt"],
    ["/", "/files/NOTES?limit=x", "/../../etc/passwd", "/%2e%2e/%00", "*", "/%zz", "/a?b=%",
     "http://localhost/index.html", "//", ""],
    12,
)  # fmt: skip
VERSIONS = _mostly(["HTTP/1.1"], ["HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "HTTP/1.12", "http/1.1"], 8)
NAMES = st.sampled_from(
    ["Content-Length", "Transfer-Encoding", "Origin", "Cookie", "Last-Event-ID", "Connection",
     "Upgrade", "Expect", "X-Tenant", "Accept", "Access-Control-Request-Method",
     "Access-Control-Request-Headers", "Host", " Host", "Host ", ""]
) | st.text(max_size=8)  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(
        ["0", "5", "-1", "1e3", "99999999999999999999", "chunked", "gzip, chunked",
         "https://app.example.com", "null", "keep-alive", "close", "h2c", "websocket",
         "100-continue", "acme", "text/event-stream", "GET", "x-tenant, last-event-id"]
    ),
    st.text(max_size=16),
)  # fmt: skip
CREDENTIALS = st.one_of(
    TOKENS.map(lambda t: f"Authorization: Bearer {t}"),
    TOKENS.map(lambda t: f"Cookie: session={t}"),
    st.just(""),
)
ENDS = st.sampled_from(["\r\n", "\r\n", "\r\n", "\n", "\r", "\r\r\n"])
BODIES = st.sampled_from(["", "hello", "5\r\nhello\r\n0\r\n\r\n", "zz\r\n", "0\r\n\r\n"]) | st.text(
    max_size=12
)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """One request: mostly well-formed where it matters, hostile somewhere."""
    end = draw(ENDS)
    lines = [f"{draw(METHODS)} {draw(TARGETS)} {draw(VERSIONS)}"]
    if draw(st.integers(0, 3)):
        lines.append("Host: localhost")
    if credentials := draw(CREDENTIALS):
        lines.append(credentials)
    separators = st.sampled_from([": ", ":", " : "])
    for name, separator, value in draw(st.lists(st.tuples(NAMES, separators, VALUES), max_size=5)):
        lines.append(f"{name}{separator}{value}")
    return f"{end.join(lines)}{end}{end}{draw(BODIES)}".encode("utf-8", "surrogatepass")


INPUTS = st.one_of(
    st.lists(requests(), min_size=1, max_size=3).map(b"".join),
    st.binary(max_size=200),
)


def exchange(port: int, data: bytes, points: list[int]) -> bytes:
    """Write ``data`` in pieces, shut the write side, read until the gateway closes."""
    answer = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            for piece in cuts(data, points):
                sock.sendall(piece)
            sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass  # closed on us: a close is an answer
        except TimeoutError:
            raise AssertionError(f"neither answered nor closed: {bytes(answer[:80])!r}") from None
    return bytes(answer)


@FUZZ
@given(data=INPUTS, points=st.lists(st.integers(0, 400), max_size=4))
def test_any_request_bytes_are_answered_with_a_status_or_a_close_and_log_no_error(
    gateway: tuple[int, LoggedProblems], data: bytes, points: list[int]
) -> None:
    assume(not data.startswith(PREFACE[:3]))  # prior-knowledge HTTP/2 is h2's to answer
    port, problems = gateway
    problems.lines.clear()
    answer = exchange(port, data, points)
    assert answer == b"" or STATUS_LINE.match(answer), answer[:120]
    assert problems.lines == []


@FUZZ
@given(
    token=TOKENS,
    where=st.sampled_from(["header", "cookie", "query"]),
    origin=st.sampled_from(["", "https://app.example.com", "null"]) | st.text(max_size=10),
)
@example(token=_token({"alg": "ES256", "kid": "中"}, {}), where="header", origin="")
def test_any_credentials_on_a_guarded_route_are_answered_with_200_401_or_403(
    gateway: tuple[int, LoggedProblems], token: str, where: str, origin: str
) -> None:
    port, problems = gateway
    problems.lines.clear()
    target = "/private/report.txt"
    lines = ["Host: localhost"]
    if where == "header":
        lines.append(f"Authorization: Bearer {token}")
    elif where == "cookie":
        lines.append(f"Cookie: session={token}")
    else:
        target += f"?access_token={token}"
    if origin:
        lines.append(f"Origin: {origin}")
    head = "\r\n".join([f"GET {target} HTTP/1.1", *lines])
    answer = exchange(port, f"{head}\r\n\r\n".encode("utf-8", "surrogatepass"), [])
    assert answer[:13] in (b"HTTP/1.1 200 ", b"HTTP/1.1 400 ", b"HTTP/1.1 401 ", b"HTTP/1.1 403 ")
    assert problems.lines == []


SETTING_CODES = st.sampled_from([0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x8]) | st.integers(0, 0xFFFF)
SETTING_VALUES = st.sampled_from(
    [0, 1, 2, 2**14 - 1, 2**14, 2**24 - 1, 2**24, 2**31 - 1, 2**31, 2**32 - 1]
) | st.integers(0, 2**32 - 1)
ALLOWED = {
    0x2: lambda v: v in (0, 1),  # ENABLE_PUSH
    0x4: lambda v: v <= 2**31 - 1,  # INITIAL_WINDOW_SIZE
    0x5: lambda v: 2**14 <= v <= 2**24 - 1,  # MAX_FRAME_SIZE
    0x8: lambda v: v in (0, 1),  # ENABLE_CONNECT_PROTOCOL
}
"""RFC 9113 §6.5.2 and RFC 8441 §3: the settings values a server may accept from a client."""


@FUZZ
@given(settings=st.lists(st.tuples(SETTING_CODES, SETTING_VALUES), max_size=6))
@example(settings=[(0x2, 2)])
@example(settings=[(0x4, 2**31)])
@example(settings=[(0x5, 1)])
@example(settings=[(0x5, 2**24)])
def test_an_h2c_upgrade_is_answered_101_or_400_naming_the_setting_whatever_its_settings(
    gateway: tuple[int, LoggedProblems], settings: list[tuple[int, int]]
) -> None:
    port, problems = gateway
    problems.lines.clear()
    payload = b"".join(struct.pack("!HL", code, value) for code, value in settings)
    head = (
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nUpgrade: h2c\r\n"
        b"Connection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: "
        + base64.urlsafe_b64encode(payload).rstrip(b"=")
        + b"\r\n\r\n"
    )
    answer = exchange(port, head, [])
    if all(ALLOWED.get(code, lambda v: True)(value) for code, value in settings):
        assert answer.startswith(b"HTTP/1.1 101 Switching Protocols\r\n"), answer[:120]
    else:
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:120]
        assert b"HTTP2-Settings: " in answer
    assert problems.lines == []
