"""AsyncAPI for ssegate: documents in, bindings out, and the config's SSE endpoints back out.

- :mod:`~ssegate.asyncapi.document`: load a 3.0.0/2.6.0 document, check it against the
  official JSON Schema (shipped in ``schemas/``), refuse with the JSON pointer of the problem.
- :mod:`~ssegate.asyncapi.model`: the document reduced to servers, channels, operations.
- :mod:`~ssegate.asyncapi.expand` (+ :mod:`~ssegate.asyncapi.south`): ``asyncapi`` bindings
  turned into the tcp/tls/http/sse/sse-kafka/kafka bindings they describe, at load time.
- :mod:`~ssegate.asyncapi.export`: a resolved config → its AsyncAPI 3.0.0 document.
- :mod:`~ssegate.asyncapi.cli`: ``ssegate asyncapi export|validate|expand``.
"""

from ssegate.asyncapi.document import AsyncApiError, load_document, official_schema
from ssegate.asyncapi.expand import expand_asyncapi
from ssegate.asyncapi.export import export_document

__all__ = [
    "AsyncApiError",
    "expand_asyncapi",
    "export_document",
    "load_document",
    "official_schema",
]
