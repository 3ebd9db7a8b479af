"""Everything that talks HTTP to an engine, a router or a worker; nothing else does.

Its modules and where each is used: docs/architecture.md.
"""
