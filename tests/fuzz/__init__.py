"""Fuzz targets: hostile input to every parser a client, an upstream or a config reaches."""
