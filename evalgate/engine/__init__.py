"""Everything that talks HTTP to an engine: URLs, readiness, discovery, requests, retries."""
