"""One gate run, its stages in order: thresholds, data, readiness, context, probe, eval, verdict."""
