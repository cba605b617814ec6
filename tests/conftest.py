"""Every test runs on uvloop, the event loop the gateway runs on in production."""

from __future__ import annotations

import asyncio

import uvloop

asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
