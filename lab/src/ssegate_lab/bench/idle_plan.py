"""How many processes, source addresses and connects in flight an idle-connection run needs.

Holding 100,000 idle connections over loopback meets four limits of the machine before it
meets the gateway's:

- **open files**: every connection is a descriptor in the gateway and another in the client,
  and ``RLIMIT_NOFILE``'s hard limit caps each process. A process may raise its soft limit to
  the hard one (the gateway does at start) but not beyond. When the connections do not fit
  in one process, the gateway runs several workers sharing the port with ``SO_REUSEPORT``
  (the kernel hashes each connection to one of them, so every worker is planned with
  headroom), and the client runs several processes.
- **source ports**: every connection to one gateway port needs its own (source address, port)
  pair; ``ip_local_port_range`` gives each 127.0.0.x address about 28,000 ports. Clients bind
  to as many addresses as the count needs, each filled to at most 70 %, so that the kernel's
  search for a free port stays short.
- **accept backlog**: connects in flight over all client processes stay within the listen
  backlog, which the kernel caps at ``somaxconn``.
- **conntrack**: where connection tracking is active, each connection takes an entry; a table
  too small for the run is reported before anything is opened.

:func:`machine_limits` reads these from ``/proc``; :func:`plan_idle` is pure and decides.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass
from pathlib import Path

RESERVED_FILES = 256
"""Descriptors a process keeps for itself: listeners, the event loop, pipes, imports."""
WORKER_FILL = 0.85
"""Share of a gateway worker's descriptors planned for, leaving room for an uneven hash."""
PORT_FILL = 0.70
"""Share of one source address's ephemeral ports used."""
MAX_IN_FLIGHT = 256
"""Connects in flight per client process at most."""
GATEWAY_BACKLOG = 4096
"""The listen backlog the gateway asks for (``engine/runtime.py``)."""
FIRST_SOURCE = 2
"""Client sources are 127.0.0.2 upwards; 127.0.0.1 is the gateway's address."""
LAST_SOURCE = 254


class PlanError(ValueError):
    """An idle run that cannot be made as asked; the message says which value or limit."""


@dataclass(frozen=True, slots=True)
class MachineLimits:
    open_files_soft: int
    open_files_hard: int
    """Per process; an unlimited hard limit is given as the kernel's ``nr_open``."""
    ephemeral_ports: int
    somaxconn: int
    syn_backlog: int
    conntrack_max: int | None
    """``None``: no connection tracking on this machine."""
    conntrack_count: int | None


@dataclass(frozen=True, slots=True)
class IdlePlan:
    connections: int
    gateway_workers: int
    client_processes: int
    sources: int
    """Source addresses one phase binds its client sockets to."""
    connects_in_flight: int
    """Per client process."""
    notes: tuple[str, ...]


def machine_limits() -> MachineLimits:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nr_open = _read_int("/proc/sys/fs/nr_open") or 1_048_576
    if hard == resource.RLIM_INFINITY:
        hard = nr_open
    if soft == resource.RLIM_INFINITY:
        soft = hard
    ports = Path("/proc/sys/net/ipv4/ip_local_port_range")
    try:
        low, high = (int(part) for part in ports.read_text().split())
        ephemeral = high - low + 1
    except (OSError, ValueError):
        ephemeral = 28_232  # the kernel's default range, 32768-60999
    return MachineLimits(
        open_files_soft=soft,
        open_files_hard=hard,
        ephemeral_ports=ephemeral,
        somaxconn=_read_int("/proc/sys/net/core/somaxconn") or 4096,
        syn_backlog=_read_int("/proc/sys/net/ipv4/tcp_max_syn_backlog") or 1024,
        conntrack_max=_read_int("/proc/sys/net/netfilter/nf_conntrack_max"),
        conntrack_count=_read_int("/proc/sys/net/netfilter/nf_conntrack_count"),
    )


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def plan_idle(
    connections: int,
    limits: MachineLimits,
    *,
    gateway_workers: int | None = None,
    client_processes: int | None = None,
    min_client_processes: int = 1,
) -> IdlePlan:
    """The processes, sources and concurrency for ``connections`` idle connections.

    ``gateway_workers`` / ``client_processes`` fix those counts instead of deriving them; a
    fixed count too small for the open-file limit is refused with the limit named.
    """
    if connections < 1:
        raise PlanError("connections must be 1 or more")
    notes: list[str] = []
    capacity = max(1, limits.open_files_hard - RESERVED_FILES)
    if connections <= capacity:
        needed_workers = 1
    else:
        needed_workers = math.ceil(connections / (capacity * WORKER_FILL))
    if gateway_workers is None:
        workers = needed_workers
    else:
        workers = gateway_workers
        if workers < needed_workers:
            raise PlanError(
                f"{connections:,} connections need {needed_workers} gateway processes here:"
                f" one process may hold at most {capacity:,} (RLIMIT_NOFILE hard limit"
                f" {limits.open_files_hard:,})"
            )
    if workers > 1:
        notes.append(
            f"one process may hold at most {capacity:,} connections here (RLIMIT_NOFILE hard"
            f" limit {limits.open_files_hard:,}, not raisable without CAP_SYS_RESOURCE), so"
            f" the gateway runs {workers} worker processes sharing the port"
        )
    needed_clients = max(min_client_processes, math.ceil(connections / capacity))
    if client_processes is None:
        clients = needed_clients
    else:
        clients = client_processes
        if clients * capacity < connections:
            raise PlanError(
                f"{connections:,} connections need {math.ceil(connections / capacity)} client"
                f" processes here (RLIMIT_NOFILE hard limit {limits.open_files_hard:,})"
            )
    per_source = max(1, int(limits.ephemeral_ports * PORT_FILL))
    sources = math.ceil(connections / per_source)
    if sources > LAST_SOURCE - FIRST_SOURCE + 1:
        raise PlanError(
            f"{connections:,} connections need {sources} source addresses at"
            f" {per_source:,} ports each; 127.0.0.2-254 has {LAST_SOURCE - FIRST_SOURCE + 1}"
        )
    backlog = min(GATEWAY_BACKLOG, limits.somaxconn)
    in_flight = max(1, min(MAX_IN_FLIGHT, backlog // (2 * clients)))
    if limits.conntrack_max is not None:
        used = limits.conntrack_count or 0
        if used + connections > limits.conntrack_max:
            raise PlanError(
                f"the conntrack table holds {limits.conntrack_max:,} entries and {used:,} are"
                f" in use: too few for {connections:,} connections"
            )
    return IdlePlan(
        connections=connections,
        gateway_workers=workers,
        client_processes=clients,
        sources=sources,
        connects_in_flight=in_flight,
        notes=tuple(notes),
    )


def source_addresses(plan: IdlePlan, block: int) -> tuple[str, ...]:
    """The ``block``-th set of ``plan.sources`` addresses in 127.0.0.2-254, wrapping around.

    Each phase of a run takes its own block, so a phase never binds to ports the previous one
    may still hold while its closed sockets are being torn down.
    """
    span = LAST_SOURCE - FIRST_SOURCE + 1
    start = (block * plan.sources) % span
    return tuple(
        f"127.0.0.{FIRST_SOURCE + (start + index) % span}" for index in range(plan.sources)
    )
