"""The links made before the workers fork: which bindings get them, and who keeps which end."""

from __future__ import annotations

from pathlib import Path

from ssegate.config.loader import load_config
from ssegate.host.worker_links import plan

CONFIG = """\
name: links
bindings:
  cache_a:
    type: kafka
    kind: cache_server
    exit: client
  cache_b:
    type: kafka
    kind: cache_server
    exit: client
  client:
    type: kafka
    kind: client
    options:
      servers: [localhost:9092]
    exit: tcp
  tcp:
    type: tcp
    kind: client
"""


def open_ends(pairs: list) -> list[tuple[bool, bool]]:
    return [(first.fileno() >= 0, other.fileno() >= 0) for first, other in pairs]


def test_each_cache_server_links_worker_0_to_every_other_worker(tmp_path: Path) -> None:
    path = tmp_path / "zilla.yaml"
    path.write_text(CONFIG)
    config = load_config(path)
    assert plan(config, 1).pairs == {}  # one worker: nothing to link
    made = plan(config, 3)
    assert sorted(made.pairs) == ["cache_a", "cache_b"]  # the client and tcp are not linked
    assert [len(pairs) for pairs in made.pairs.values()] == [2, 2]
    made.close()


def test_worker_0_keeps_its_side_of_every_pair_and_the_others_their_own(tmp_path: Path) -> None:
    path = tmp_path / "zilla.yaml"
    path.write_text(CONFIG)
    config = load_config(path)
    in_first = plan(config, 3)
    links = in_first.take(0)
    assert {name: (link.first, len(link.sockets)) for name, link in links.items()} == {
        "cache_a": (True, 2),
        "cache_b": (True, 2),
    }
    for pairs in in_first.pairs.values():
        assert open_ends(pairs) == [(True, False), (True, False)]
    in_third = plan(config, 3)
    links = in_third.take(2)
    assert all(not link.first and len(link.sockets) == 1 for link in links.values())
    for pairs in in_third.pairs.values():
        assert open_ends(pairs) == [(False, False), (False, True)]
    for made in (in_first, in_third):
        made.close()
