"""The ``asyncapi`` binding: expanded into other bindings at load time (:mod:`ssegate.asyncapi`)."""
