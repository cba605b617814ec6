"""A directory put first on a gateway's ``PYTHONPATH`` to profile its event loops
(:func:`ssegate_lab.loop_lag.profiled_env`): its ``sitecustomize`` starts
:mod:`ssegate_lab.loop_lag` in every process, the gateway unchanged."""
