"""The reports of this checkout beside another's (`--against=CHECKOUT`, e.g. a worktree of the
commit before a change to how reports are made): on the fixture sweeps, JUnit, the job summary,
compare's Markdown and every terminal stream byte for byte, and each HTML page as a browser's
parser reads it (its elements, attributes and text; an entity may be spelled another way).

Without --against the tests are skipped, saying so. Give it with `=`: the option is this test
suite's, which pytest reads only after the command line, so a path given after a space is taken
for a test path first (pytest then reads that checkout's conftest, and stops on its imports).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests import outputs as ht
from tests.compare.run_files import paired_outcomes, write_run
from tests.conftest import _READ_VARS, ROOT, Sweep
from tests.verify.sweeps import (
    CONCS,
    answers,
    baseline_answers,
    evalgate_sweep,
    harness_sweep,
    thresholds,
)

pytestmark = pytest.mark.loopback


@pytest.fixture(scope="module")
def against(request: pytest.FixtureRequest) -> Path:
    checkout = request.config.getoption("--against")
    if not checkout:
        pytest.skip("reports against another checkout: give --against=CHECKOUT")
    root = Path(checkout).resolve()
    assert (root / "evalgate" / "__init__.py").is_file(), f"{root} is no evalgate checkout"
    return root


class Parsed(HTMLParser):
    """A page as a browser's parser reads it: each start tag with its attributes (entities
    decoded), each end tag, each run of text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[Any, ...]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("start", tag, tuple(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("start", tag, tuple(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(("end", tag))

    def handle_data(self, data: str) -> None:
        if self.events and self.events[-1][0] == "text":  # one run, however it was split
            self.events[-1] = ("text", self.events[-1][1] + data)
        else:
            self.events.append(("text", data))

    def handle_decl(self, decl: str) -> None:
        self.events.append(("decl", decl))


def first_difference(ours: list[Any], theirs: list[Any]) -> str:
    for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return f"at {index}: ours {a!r}\ntheirs {b!r}"
    return f"ours has {len(ours)} items, theirs {len(theirs)}"


class Side:
    """One checkout's evalgate, run as its own process in a folder of its own (reports go
    there); the inputs are named by the same relative paths from it for both sides."""

    def __init__(self, name: str, root: Path, work: Path, env: dict[str, str]) -> None:
        self.name, self.root, self.work, self.env = name, root, work / name, env
        self.work.mkdir()

    def run(self, *args: str | Path, summary: bool = False) -> dict[str, bytes]:
        """stdout, stderr and every file the command wrote under its folder, by name."""
        out = self.work / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        env = {
            k: v
            for k, v in os.environ.items()
            if not (k.startswith("EVALGATE_") or k in _READ_VARS)
        }
        env |= self.env | {"PYTHONPATH": str(self.root)}
        if summary:
            env["GITHUB_STEP_SUMMARY"] = "out/summary.md"
        done = subprocess.run(
            [sys.executable, "-m", "evalgate.cli", *map(str, args)],
            capture_output=True,
            cwd=self.work,
            env=env,
            timeout=300,
            check=False,
        )
        files = {p.name: p.read_bytes() for p in out.iterdir()}
        return {"exit": str(done.returncode).encode(), "stdout": done.stdout, **files} | {
            "stderr": done.stderr
        }


def assert_same(ours: dict[str, bytes], theirs: dict[str, bytes], what: str) -> list[str]:
    """Every output alike (HTML as parsed); returns the names compared."""
    assert sorted(ours) == sorted(theirs), what
    for name, text in ours.items():
        if name.endswith(".html"):
            mine = Parsed(text.decode("utf-8")).events
            other = Parsed(theirs[name].decode("utf-8")).events
            assert mine == other, f"{what}: {name} {first_difference(mine, other)}"
        else:
            diff = difflib.unified_diff(
                theirs[name].decode(errors="replace").splitlines(keepends=True),
                text.decode(errors="replace").splitlines(keepends=True),
                "theirs",
                "ours",
            )
            assert text == theirs[name], f"{what}: {name} differs\n{''.join(diff)[:4000]}"
    return sorted(ours)


@pytest.fixture(scope="module")
def inputs(loopback_sweep: Sweep, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture sweeps side by side in one folder: the loopback sweep (conftest), full-GSM8K
    sweeps in both layouts with a regression (tests/verify/sweeps.py), and a sweep whose
    labels, model and answers carry the hostile string (tests/outputs.py)."""
    root = tmp_path_factory.mktemp("inputs")
    shutil.copytree(loopback_sweep.root, root / "loopback")
    shutil.copy(loopback_sweep.manifest, root / "expected.json")
    shutil.copy(loopback_sweep.thresholds, root / "loopback-thresholds.json")
    thresholds(root)
    evalgate_sweep(root / "base", "base", {c: baseline_answers() for c in CONCS})
    dropped = {c: answers(seed=i, lost=80 if c == 16 else 0) for i, c in enumerate(CONCS)}
    evalgate_sweep(root / "dropped", "dropped", dropped, labels={"hardware": "b200"})
    harness_sweep(root / "harness", {c: answers(seed=i) for i, c in enumerate(CONCS[:3])})
    hostile = ht.HOSTILE
    evalgate_sweep(root / "hbase", "b", {4: baseline_answers(), 8: baseline_answers()})
    evalgate_sweep(root / "hcand", "c", {4: answers(lost=80), 8: answers()})
    for folder in (*(root / "hbase").iterdir(), *(root / "hcand").iterdir()):
        result = json.loads((folder / "result.json").read_text())
        result["model"] = result["labels"]["hardware"] = hostile
        (folder / "result.json").write_text(json.dumps(result))
        records = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
        for record in records:
            for answer in record["filters"].values():
                answer["extracted"] = f"{answer['extracted']} {hostile}"
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    broken = root / "hcand" / ht.as_name(hostile) / "result.json"
    broken.parent.mkdir()
    broken.write_text(json.dumps({"schema": hostile, "status": hostile}), encoding="utf-8")
    base, cand = paired_outcomes(200, lost=3, gained=1)
    write_run(root / "pair-a", base, max_tokens=1024)
    write_run(
        root / "pair-b", cand, max_tokens=2048, failed=[150], question_edits={0: "3 < 4 & <b>?"}
    )
    return root


@pytest.fixture(scope="module")
def sides(against: Path, inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    work = tmp_path_factory.mktemp("sides")
    secrets = {
        "OPENAI_API_KEY": ht.KEY,
        "ROUTER_URL": ht.with_password("http://127.0.0.1:1/v1"),
        "WORKER_URLS": ht.with_password(
            "http://127.0.0.1:2/v1", ht.WORKER_USER, ht.WORKER_PASSWORD
        ),
    }
    made = []
    for name, root in (("ours", ROOT), ("theirs", against)):
        side = Side(name, root, work, secrets)
        (side.work / "in").symlink_to(inputs)
        made.append(side)
    yield made


REPORTS = ["--github", "--junit", "out/junit.xml", "--html", "out/page.html"]


VERIFY = {
    "the loopback sweep, --expect": [
        "verify", "in/loopback", "--thresholds", "in/loopback-thresholds.json",
        "--expect", "in/expected.json", *REPORTS,
    ],
    "the loopback sweep, quiet, no expectation": [
        "verify", "in/loopback", "--thresholds", "in/loopback-thresholds.json", "-q", *REPORTS,
    ],
    "a regression against the baseline": [
        "verify", "in/dropped", "--baseline", "in/base", "--thresholds", "in/thresholds.json",
        *REPORTS,
    ],
    "the harness's layout against evalgate's": [
        "verify", "in/harness", "--baseline", "in/base", "--thresholds", "in/thresholds.json",
        *REPORTS,
    ],
    "the hostile string in every label, answer and a folder name": [
        "verify", "in/hcand", "--baseline", "in/hbase", "--thresholds", "in/thresholds.json",
        *REPORTS,
    ],
}  # fmt: skip


COMPARE = {
    "loopback pass and fail": [
        "in/loopback/eval_fake_b200_conc4", "in/loopback/eval_fake_b200_conc32"
    ],
    "a regression of full GSM8K": [
        "in/base/base-conc16", "in/dropped/dropped-conc16", "--max-drop", "0.01"
    ],
    "hostile answers": ["in/hbase/b-conc4", "in/hcand/c-conc4"],
    "protocol drift, a failed request, HTML in a question": [
        "in/pair-a", "in/pair-b", "--allow-protocol-drift",
    ],
}  # fmt: skip


@pytest.mark.parametrize("args", VERIFY.values(), ids=VERIFY.keys())
def test_verify_writes_what_the_other_checkout_writes(sides, args):
    ours, theirs = (side.run(*args, summary=True) for side in sides)
    names = assert_same(ours, theirs, " ".join(args))
    assert {"junit.xml", "summary.md", "page.html"} <= set(names)


@pytest.mark.parametrize("args", COMPARE.values(), ids=COMPARE.keys())
@pytest.mark.parametrize("form", [[], ["--markdown"], ["--html", "out/compare.html"]])
def test_compare_writes_what_the_other_checkout_writes(sides, args, form):
    ours, theirs = (side.run("compare", *args, *form) for side in sides)
    assert_same(ours, theirs, " ".join(["compare", *args, *form]))


def test_the_history_page_and_table_are_the_other_checkouts(sides, inputs, tmp_path):
    """One history, recorded by the other checkout, read by both."""
    theirs_side = sides[1]
    history = tmp_path / "history.db"
    for number, sweep in enumerate(("base", "dropped", "harness", "base"), start=1):
        shutil.copytree(inputs / sweep, tmp_path / f"night{number}")
        record = theirs_side.run(
            "verify", tmp_path / f"night{number}", "--thresholds", inputs / "thresholds.json",
            "--record", history, "--sweep-id", f"2026-05-0{number}", "-q",
        )  # fmt: skip
        assert record["exit"] in (b"0", b"1"), record["stderr"]
    mark = theirs_side.run(
        "history",
        history,
        "--mark-sweep",
        "2026-05-03",
        "--reason",
        f"bad {ht.as_name(ht.HOSTILE)}",
    )
    assert mark["exit"] == b"0", mark["stderr"]
    outputs = []
    for side in sides:
        copy = side.work / "history.db"
        shutil.copyfile(history, copy)  # a newer checkout may upgrade the schema it opens
        outputs.append(side.run("history", copy.name, "--html", "out/history.html"))
    assert_same(*outputs, "history --html")
