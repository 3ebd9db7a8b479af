"""The public API is `evalgate.__all__`: pinned here, so adding or dropping a name is a decision,
and every name listed resolves (lazily: `import evalgate` stays light)."""

from __future__ import annotations

import pytest

import evalgate
from tests.conftest import modules_loaded_by

PUBLIC = [
    "AbortedError",
    "ArtifactError",
    "Check",
    "Comparison",
    "ContextError",
    "DatasetError",
    "EndpointError",
    "EvalContext",
    "EvalFailedError",
    "EvalgateError",
    "ExitCode",
    "Floor",
    "HookSummary",
    "Limit",
    "NativeLength",
    "NotReadyError",
    "ProbeError",
    "Result",
    "RunOutcome",
    "Sample",
    "Score",
    "Settings",
    "Thresholds",
    "ThresholdsError",
    "UsageError",
    "Verdict",
    "__version__",
    "compare_runs",
    "decide",
    "derive_context",
    "load_native_max_len",
    "load_thresholds",
    "native_max_len",
    "resolve_floor",
    "run_gate",
    "run_identity",
]


@pytest.mark.unit
def test_all_is_pinned():
    assert evalgate.__all__ == PUBLIC


@pytest.mark.unit
def test_every_public_name_resolves_and_is_what_it_claims():
    for name in PUBLIC:
        member = getattr(evalgate, name)
        if name != "__version__":
            assert getattr(member, "__name__", name) == name, name
    assert isinstance(evalgate.__version__, str)


@pytest.mark.unit
def test_an_unknown_name_is_an_attribute_error():
    try:
        evalgate.no_such_member  # noqa: B018
    except AttributeError as exc:
        assert "has no attribute 'no_such_member'" in str(exc)
    else:
        raise AssertionError("evalgate.no_such_member resolved")


@pytest.mark.loopback
def test_importing_evalgate_loads_neither_lm_eval_nor_pydantic():
    loaded = modules_loaded_by("import evalgate")
    assert "lm_eval" not in loaded
    assert "pydantic" not in loaded
