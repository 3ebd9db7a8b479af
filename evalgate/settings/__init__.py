"""evalgate's settings: the one place the environment is read (docs/architecture.md, the
layout). The Settings model (values.py) loads pydantic, so `evalgate verify` imports only
environment.py.
"""
