"""What a TLS record costs per event, and what writing a batch's events as one record saves.

``python lab/src/ssegate_lab/bench/tls_records.py`` runs a TLS session (TLS 1.3, the
ciphersuite OpenSSL picks, an ECDSA P-256 certificate made for the run) between two
``ssl.SSLObject`` joined by memory BIOs in one process. That is how asyncio's TLS transport,
and so the gateway's ``tls`` listener, encrypts: there is no socket, so only the record layer
is timed. For each batch size B, ``events`` events of ``size`` bytes are encrypted B at a time:
one ``SSLObject.write`` of the B events joined and framed as the HTTP/1.1 chunk the gateway
writes, so one record (B = 1 is what the gateway does when each write carries one event; a
larger B what a fan-out that coalesces a batch does), and after each write the ciphertext is
read out of the outgoing BIO, as the transport does.
It reports the process CPU per event (µs, median of ``repeat`` runs) and the bytes on the wire
per event. The peer then decrypts all of it, and the run fails unless every byte came through.

Kernel TLS: the run also reports whether this kernel offers the ``tls`` upper-layer protocol
(``/proc/sys/net/ipv4/tcp_available_ulp``) and whether this Python's ``ssl`` has
``OP_ENABLE_KTLS`` (3.12 on). Neither would help the gateway as it is: asyncio's TLS works
over memory BIOs, and OpenSSL's kTLS offload needs OpenSSL to own the socket.
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ssegate_lab.bench.result_file import started, write
from ssegate_lab.testing.certs import write_self_signed

BATCHES = (1, 2, 5, 10, 20, 50)
ULP_FILE = Path("/proc/sys/net/ipv4/tcp_available_ulp")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def event(index: int, size: int) -> bytes:
    """An SSE event of about ``size`` bytes, as the sse-kafka proxy writes one."""
    head = b"id:AQIA%06d\ndata:" % index
    return head + b"x" * max(0, size - len(head) - 2) + b"\n\n"


class Session:
    """A server and a client ``SSLObject`` with their handshake done."""

    def __init__(self, cert: Path, key: Path) -> None:
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(cert, key)
        client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client_context.check_hostname = False
        client_context.verify_mode = ssl.CERT_NONE
        self.to_client, self.to_server = ssl.MemoryBIO(), ssl.MemoryBIO()
        server_in, client_in = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.server = server_context.wrap_bio(server_in, self.to_client, server_side=True)
        self.client = client_context.wrap_bio(client_in, self.to_server)
        self._client_in, self._server_in = client_in, server_in
        for _ in range(10):
            done = 0
            for side in (self.client, self.server):
                try:
                    side.do_handshake()
                    done += 1
                except ssl.SSLWantReadError:
                    pass
            self._server_in.write(self.to_server.read())
            self._client_in.write(self.to_client.read())
            if done == 2:
                break
        self.cipher = self.server.cipher()
        self.version = self.server.version()

    def decrypt_all(self, wire: bytes) -> int:
        """Feed ``wire`` to the client; the plaintext bytes it reads."""
        self._client_in.write(wire)
        total = 0
        while True:
            try:
                data = self.client.read(1 << 20)
            except ssl.SSLWantReadError:
                return total
            if not data:
                return total
            total += len(data)


def encrypt(session: Session, writes: list[bytes]) -> tuple[float, bytes]:
    """CPU seconds to encrypt ``writes`` one ``write`` each, and the ciphertext."""
    server, outgoing = session.server, session.to_client
    wire = bytearray()
    started = time.process_time()
    for data in writes:
        server.write(data)
        wire += outgoing.read()
    return time.process_time() - started, bytes(wire)


def measure(events: int, size: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ssegate-tls-records-") as tmp:
        cert, key = write_self_signed(Path(tmp))
        plain = [event(i, size) for i in range(events)]
        cases: list[dict[str, Any]] = []
        session_info: dict[str, Any] = {}
        for batch in BATCHES:
            writes = [chunk(b"".join(plain[i : i + batch])) for i in range(0, events, batch)]
            cpu: list[float] = []
            wire_bytes = 0
            for _ in range(repeat):
                session = Session(cert, key)
                session_info = {"version": session.version, "cipher": session.cipher}
                seconds, wire = encrypt(session, writes)
                received = session.decrypt_all(wire)
                expected = sum(len(w) for w in writes)
                if received != expected:
                    raise RuntimeError(f"B={batch}: {received} of {expected} bytes came through")
                cpu.append(seconds)
                wire_bytes = len(wire)
            cases.append({
                "batch": batch,
                "writes": len(writes),
                "cpu_us_per_event": round(statistics.median(cpu) / events * 1e6, 3),
                "cpu_us_per_event_runs": [round(c / events * 1e6, 3) for c in cpu],
                "wire_bytes_per_event": round(wire_bytes / events, 1),
                "plain_bytes_per_event": round(sum(len(w) for w in writes) / events, 1),
            })  # fmt: skip
    return {
        "scenario": "tls_records",
        "events": events,
        "event_bytes": size,
        "repeat": repeat,
        "session": session_info,
        "openssl": ssl.OPENSSL_VERSION,
        "python": sys.version.split()[0],
        "kernel_tls": {
            "available_ulp": ULP_FILE.read_text().split() if ULP_FILE.exists() else None,
            "python_has_op_enable_ktls": hasattr(ssl, "OP_ENABLE_KTLS"),
        },
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=150, help="bytes of each event")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    start = started()
    result = measure(args.events, args.size, args.repeat)
    if args.out is not None:
        write(result, args.out, start)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
