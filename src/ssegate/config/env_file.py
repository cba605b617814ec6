"""``--env-file``: a dotenv file whose variables ``${{env.NAME}}`` in the config may read.

python-dotenv reads it: ``NAME=value`` lines, quotes and their escapes, ``#`` comments,
``export``. Its variables are added to the environment; a variable already set there wins over
the file.

The file is operator input, so it is bounded before anything is set, and every refusal is a
:class:`ConfigError` naming the file and the line:

- it is read no further than the config's size limit, as UTF-8
  (:func:`~ssegate.config.yaml_reader.read_text`, the same limit as ``zilla.yaml``);
- a line dotenv cannot read is refused, not skipped, and so is a file of more than
  :data:`MAX_VARIABLES` variables (each costs the environment a copy of itself to set);
- a control character other than a tab or a line break, NUL included, is refused, in the text
  and in a value once its quotes' escapes (``"\\a"``) are decoded;
- values are taken as written, never expanded: dotenv's ``${NAME}`` expansion has no bound on
  what it costs (a chain of doublings, ``B1=${B0}${B0}``, grows exponentially, and its scan is
  quadratic in unclosed ``${``), so a value holding ``${`` is refused rather than kept as
  text its writer meant otherwise. Such a value belongs in the environment itself.

Refusals name a variable, never echo a value.
"""

from __future__ import annotations

import io
import re

from dotenv import load_dotenv
from dotenv.parser import parse_stream

from ssegate.config.errors import ConfigError
from ssegate.config.yaml_reader import DEFAULT_LIMITS, ConfigLimits, read_text

MAX_VARIABLES = 10_000
"""The most variables one env file may set."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""C0 controls but tab, LF and CR (line breaks, in a quoted value too), and DEL."""


def load_env_file(path: str | None, limits: ConfigLimits = DEFAULT_LIMITS) -> None:
    """Add the variables of the dotenv file ``path`` to the environment, unless already set.

    Raises :class:`ConfigError` naming the file (and the line) when it cannot be read or is
    refused; then the environment is left as it was.
    """
    if path is None:
        return
    text = read_text(path, "env file", limits)
    check_env_text(text, path)
    load_dotenv(stream=io.StringIO(text), override=False, interpolate=False)


def check_env_text(text: str, path: str) -> None:
    """Raise :class:`ConfigError` at the first line of ``text`` that is refused (see above)."""
    found = _CONTROL.search(text)
    if found is not None:
        line = text.count("\n", 0, found.start()) + 1
        raise ConfigError(
            f"{path}: line {line}", f"holds the control character U+{ord(found.group()):04X}"
        )
    variables = 0
    for binding in parse_stream(io.StringIO(text)):
        where = f"{path}: line {binding.original.line}"
        if binding.error:
            raise ConfigError(where, "is not a NAME=value line")
        if binding.key is None or binding.value is None:
            continue
        variables += 1
        if variables > MAX_VARIABLES:
            raise ConfigError(where, f"the file sets more than {MAX_VARIABLES} variables")
        value = binding.value
        if (found := _CONTROL.search(value)) is not None:
            raise ConfigError(
                where,
                f"{binding.key}'s value holds the control character U+{ord(found.group()):04X}",
            )
        if "${" in value:
            raise ConfigError(
                where,
                f"{binding.key}'s value holds '${{': ssegate does not expand variables in an"
                " env file; set this one in the environment instead",
            )
