"""What runs beside the gateway, not in it: the benchmark lab (``ssegate bench``), the demo, the
local Kafka broker (``ssegate kafka``), Spark standalone cluster (``ssegate spark``) and Apicurio
registry launchers, the setup step that fetches and builds the tools, and the helpers the tests
share.

It is its own distribution (``lab/pyproject.toml``), so the ``ssegate`` wheel is the gateway
alone; ``./run`` installs both. Installed, it adds its commands to ``ssegate`` through the
``ssegate.commands`` entry points.
"""
