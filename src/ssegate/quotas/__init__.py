"""Stream quotas per identity and per client address: ssegate's ``x-ssegate-quotas``.

Zilla has no such option; this is ssegate's own extension (hence the ``x-ssegate-`` prefix), so
that one client address or one identity cannot take every stream a gateway can hold while every
other client is turned away. It bounds, for the SSE streams of one ``sse`` server binding:

- ``streams-per-identity``: concurrent streams per guard identity (a JWT's subject);
- ``streams-per-address``: concurrent streams per client address
  (:mod:`~ssegate.quotas.address`, with the ``trusted-proxies`` rule for ``X-Forwarded-For``);
- ``opens-per-identity``: how fast an identity opens streams, a token bucket
  (:mod:`~ssegate.quotas.bucket`).

Why the ``sse`` server's options. Every SSE stream passes an ``sse`` server, whatever its source
(an upstream SSE server, or the sse-kafka proxy behind it), and whichever binding carries
``guarded``: the identities a request's credentials establish are filled in by the http server's
``options.authorization`` before any route is tried (``request.identities``), so they are known
at the sse server whether the http server's route, the sse server's or the sse-kafka proxy's
holds the ``guarded``. Streams are what is counted, so the option sits where streams are made;
an http server route also carries files and challenge answers, which no stream quota should
count. The check wraps the built sse server (:mod:`ssegate.bindings.sse.quota_gate`) and never
changes how it serves an admitted stream.

Across the workers of ``ssegate start --workers N`` the counts live in one shared mapping made
before the fork (:mod:`~ssegate.quotas.shared`, in fixed-size tables:
:mod:`~ssegate.quotas.table`), so a quota is the gateway's total, not each worker's. Separate
``ssegate start`` processes (``--reuse-port``) and separate hosts each keep their own.

The parts: :mod:`~.address`, :mod:`~.bucket` and :mod:`~.table` are pure; :mod:`~.policy`
reads the option and decides a stream; :mod:`~.shared` owns the memory and its lock.
"""
