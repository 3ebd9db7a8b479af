"""evalgate's settings: one model for every command (values.py, its groups beside it), and the
one place the environment and the config file are read (sources.py; docs/settings.md).
evalgate.environment names the variables without loading pydantic, for `evalgate --help`.
"""
