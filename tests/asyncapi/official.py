"""The official AsyncAPI JSON Schemas, installed from npm (``@asyncapi/specs``) into .cache/npm.

The package ships copies (``ssegate/asyncapi/schemas``); tests check them and the exports
against the npm package itself, installed here on first use like the other test tools.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

SPECS_VERSION = "6.11.1"
ROOT = Path(__file__).resolve().parents[2]
NPM_PREFIX = ROOT / ".cache" / "npm"
PACKAGE = NPM_PREFIX / "node_modules" / "@asyncapi" / "specs"


def npm_schema(version: str) -> dict[str, Any]:
    """The schema of AsyncAPI ``version`` from the npm package (installed if missing)."""
    manifest = PACKAGE / "package.json"
    installed = manifest.exists() and json.loads(manifest.read_text())["version"] == SPECS_VERSION
    if not installed:
        NPM_PREFIX.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(NPM_PREFIX),
                "--no-audit",
                "--no-fund",
                "--no-save",
                f"@asyncapi/specs@{SPECS_VERSION}",
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
    loaded: dict[str, Any] = json.loads(
        (PACKAGE / "schemas" / f"{version}-without-$id.json").read_text()
    )
    return loaded
