"""Loading ``zilla.yaml``: :func:`load_config` returns the resolved :class:`Config`."""

from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.loader import load_config, load_config_text
from ssegate.config.model import Binding, Component, Config, Route

__all__ = [
    "Binding",
    "Component",
    "Config",
    "ConfigError",
    "ConfigErrors",
    "Route",
    "load_config",
    "load_config_text",
]
