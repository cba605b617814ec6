"""The official AsyncAPI JSON Schemas from the npm package ``@asyncapi/specs``.

The package ships copies (``ssegate/asyncapi/schemas``); tests check them and the exports
against the npm package itself, installed by ``./run``'s setup step ``asyncapi-specs``.
"""

from __future__ import annotations

import json
from typing import Any

from ssegate_lab.testing.tools import prepared


def npm_schema(version: str) -> dict[str, Any]:
    """The schema of AsyncAPI ``version`` from the npm package."""
    schema = prepared("asyncapi-specs") / "schemas" / f"{version}-without-$id.json"
    loaded: dict[str, Any] = json.loads(schema.read_text())
    return loaded
