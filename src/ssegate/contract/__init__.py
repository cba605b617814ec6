"""The ground floor: the joints the layers above meet on, importing nothing of ssegate's own.

The http server and the bindings it routes to exchange a request and a response stream
(:mod:`~ssegate.contract.exchange`); a guard answers credentials with an identity or a
rejection (:mod:`~ssegate.contract.identity`), and every guard type is one
:class:`~ssegate.contract.guard.Guard`. Everything else builds on these:

- ``config`` reads ``zilla.yaml`` (a route's ``guarded`` is read against a request here);
- ``telemetry``, ``vaults``, ``catalogs``, ``models``, ``asyncapi`` are the cores the bindings
  share;
- ``engine`` builds the graph of bindings and guards, naming each by ``module:function`` and
  importing none; ``guards`` implements the guard types. The two never import each other: they
  meet here;
- ``bindings`` import all of the above; ``cli`` starts it all.

``tests/test_import_graph.py`` holds this order (``LAYERS``) and fails when an import breaks it.
"""
