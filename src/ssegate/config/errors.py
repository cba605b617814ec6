"""Config errors: every one names the YAML path it is about."""

from __future__ import annotations


class ConfigError(Exception):
    """A problem in ``zilla.yaml``, reported as ``<yaml path>: <message>``."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class ConfigErrors(ConfigError):
    """Several problems found at once; ``str()`` lists them one a line."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        Exception.__init__(self, "\n".join(str(e) for e in errors))
        self.path = errors[0].path if errors else ""
        self.message = str(self)


class NotSupportedYet(ConfigError):
    """A part of the config the schema accepts but this version of ssegate cannot run yet."""
