"""ssegate: a Server-Sent Events gateway that reads Zilla's ``zilla.yaml``."""

__version__ = "0.1.0"
