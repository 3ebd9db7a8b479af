"""The gate: its rule, its sequential test, the run's record and the verdict."""
