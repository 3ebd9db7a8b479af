"""The pre-flight probe: one request at the real output budget, as the eval will send it."""
