"""`evalgate history HISTORY --fit-thresholds FILE` through the CLI in its own process, on a
history `verify --record` wrote from sweeps of full GSM8K runs (tests/verify/sweeps.py)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from tests.conftest import run_subprocess
from tests.history.test_history import history_cli, thresholds, verify
from tests.verify.sweeps import N, answers, evalgate_sweep

# qwen3: five runs of full GSM8K that differ a little, two of them failing the file in use's
# 0.945 (a fit takes failing runs too), and a broken one marked bad; thin: two runs, too few.
IN_USE = {"default": {"gsm8k": 0.945}}
QWEN = {
    1: answers(seed=0),
    2: answers(seed=1, gained=6),
    3: answers(seed=2, lost=12),
    4: answers(seed=3, lost=8),
}
QWEN_LATER = {5: answers(seed=4, lost=5), 6: answers(lost=150)}
THIN = {1: answers(seed=5), 2: answers(seed=6)}


def scores() -> list[float]:
    """qwen3's scores the fit takes: every run but the one marked bad."""
    return [sum(a) / N for a in [*QWEN.values(), QWEN_LATER[5]]]


def recorded(root: Path, history: str) -> Path:
    """The history of three sweeps gated by IN_USE, the broken run marked; the folder of the
    first sweep (its runs' evidence)."""
    (root / "thresholds.json").write_text(json.dumps(IN_USE))
    first = evalgate_sweep(root / "s1", "one", QWEN)
    second = evalgate_sweep(root / "s2", "two", QWEN_LATER)
    thin = evalgate_sweep(root / "s3", "thin", THIN, labels={"model_prefix": "thin"})
    for sweep, name, code in ((first, "n1", 1), (second, "n2", 1), (thin, "n3", 0)):
        done = verify(root, str(sweep), "--record", history, "--sweep-id", name)
        assert done.returncode == code, done.stdout + done.stderr
    marked = history_cli(history, "--mark-run", "two-conc6", "--reason", "broken node")
    assert marked.returncode == 0, marked.stderr
    return first


def summary_line(stdout: str, start: str) -> str:
    [line] = [line.strip() for line in stdout.splitlines() if line.strip().startswith(start)]
    return line


def test_a_fitted_file_is_accepted_by_verify_and_a_thin_model_is_said_per_model(tmp_path, history):
    first = recorded(tmp_path, history)
    fitted = tmp_path / "fitted.json"
    done = history_cli(
        history, "--fit-thresholds", str(fitted), "--thresholds", str(thresholds(tmp_path))
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("7 completed unmarked run(s) fitted by beta-binomial against ")

    document = json.loads(fitted.read_text())
    assert document["default"] == IN_USE["default"]  # carried over from the file in use
    floor = document["models"]["qwen3"]["gsm8k"]
    assert 0.85 < floor < min(scores())
    assert "thin" not in document["models"]  # too thin: the file in use's floor stands

    qwen = summary_line(done.stdout, "model_prefix=qwen3 gsm8k:")
    assert qwen.startswith(f"model_prefix=qwen3 gsm8k: 0.9450 (default) -> {floor:.4f} (prefix:")
    mean = sum(scores()) / len(scores())  # every run asked all N questions
    assert f"beta-binomial: 5 runs, mean {mean:.4f}" in qwen  # two failing runs among them
    thin = summary_line(done.stdout, "model_prefix=thin gsm8k:")
    assert thin.startswith("model_prefix=thin gsm8k: 0.9450 (default) -> 0.9450 (default);")
    assert "too thin to fit: 2 runs, need 5" in thin
    assert done.stdout.strip().splitlines()[-1].startswith(f"wrote {fitted}")

    # verify takes the fitted file, and its floor is the one that gates qwen3's runs
    verdict = tmp_path / "verdict.json"
    gated = run_subprocess(
        "verify", str(first), "--thresholds", str(fitted), "--no-github", "--json", str(verdict)
    )
    assert gated.returncode == 0, gated.stdout + gated.stderr  # the floor is under every run
    entries = json.loads(verdict.read_text())["entries"]
    assert len(entries) == len(QWEN)
    floors = {(c["threshold"], c["matched"]) for e in entries for c in e["checks"]}
    assert floors == {(floor, "prefix:qwen3")}


def test_policy_ix_gives_the_harness_rule(tmp_path, history):
    recorded(tmp_path, history)
    fitted = tmp_path / "ix.json"
    done = history_cli(
        history,
        "--fit-thresholds",
        str(fitted),
        "--policy",
        "ix",  # against the shipped file, whose GSM8K default is the harness's 0.90
    )
    assert done.returncode == 0, done.stderr
    # the rule, by hand: max(0.90, Q1 - 1.5 IQR - 0.02 rounded down to two decimals) over the
    # scores, quartiles interpolated linearly between order statistics (numpy's default)
    q1, _, q3 = statistics.quantiles(scores(), n=4, method="inclusive")
    expected = max(0.90, math.floor((q1 - 1.5 * (q3 - q1) - 0.02) * 100) / 100)
    assert expected > 0.90  # the fence, not the harness's minimum
    document = json.loads(fitted.read_text())
    assert document["models"]["qwen3"]["gsm8k"] == expected
    qwen = summary_line(done.stdout, "model_prefix=qwen3 gsm8k:")
    assert f"-> {expected:.4f} (prefix:qwen3)" in qwen and f"ix: 5 runs, Q1 {q1:.4f}" in qwen
    assert "too thin to fit: 2 runs, need 5" in summary_line(done.stdout, "model_prefix=thin")


@pytest.mark.loopback
def test_a_fitted_file_onto_evidence_or_an_input_is_refused_and_nothing_is_written(tmp_path):
    history = str(tmp_path / "history.db")
    first = recorded(tmp_path, history)
    in_use = thresholds(tmp_path)
    evidence = first / "one-conc1" / "result.json"
    before = {path: path.read_bytes() for path in (evidence, in_use, Path(history))}
    for target, why in (
        (evidence, "evidence"),
        (tmp_path / "new" / "result.json", "evidence"),  # an evidence name, even where none is
        (in_use, str(in_use)),
        (Path(history), history),
    ):
        done = history_cli(history, "--fit-thresholds", str(target), "--thresholds", str(in_use))
        assert done.returncode == 2, (target, done.stdout, done.stderr)
        assert "--fit-thresholds" in done.stderr and why in done.stderr, done.stderr
        assert done.stdout == ""
    assert {path: path.read_bytes() for path in before} == before
    assert not (tmp_path / "new").exists()

    for bad, message in (
        (["--policy", "ix"], "--policy goes with --fit-thresholds FILE."),
        (["--thresholds", str(in_use)], "--thresholds goes with --fit-thresholds FILE."),
        (["--fit-thresholds", "x.json", "--json", "-"], "--fit-thresholds goes alone"),
    ):
        refused = history_cli(history, *bad)
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr
