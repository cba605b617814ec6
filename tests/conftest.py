"""Every test runs on uvloop, the event loop the gateway runs on in production, and offline.

Configs load as the ``ssegate`` command loads them: asyncapi bindings expanded
(:func:`ssegate.cli.register_expanders`).

Offline (``$SSEGATE_OFFLINE``, inherited by every process a test starts): nothing is fetched or
built during a test. ``./run test`` fetches and builds it all first
(:mod:`ssegate_lab.setup_tools`); a test that finds something missing fails naming the setup
step that provides it.
"""

from __future__ import annotations

import asyncio
import os

import uvloop

from ssegate.cache import OFFLINE
from ssegate.cli import register_expanders

asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
register_expanders()
os.environ[OFFLINE] = "1"
