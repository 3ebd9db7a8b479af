"""evalgate's version and distribution name, the one place each is written."""

__version__ = "0.2.0"

DISTRIBUTION = "evalgate-bench"
"""The name to install evalgate by (`evalgate` on the package registry is another project)."""

EVAL_EXTRA = f"pip install '{DISTRIBUTION}[eval]'"
"""The one line that adds what `evalgate run` and `evalgate hook` need (lm-eval, its data stack)."""
