"""Loading ``zilla.yaml``: :func:`~ssegate.config.loader.load_config` returns the resolved
:class:`~ssegate.config.model.Config`.

The package imports nothing itself: :mod:`.errors` and :mod:`.model` are imported by the parts
the loader resolves (guards, bindings), so the loader must not be loaded by importing them.
"""
