"""Small programs that go with ssegate: an example upstream SSE server."""
