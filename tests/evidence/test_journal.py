"""journal.jsonl keeps the format journals have always had, so --resume reads one written by an
earlier evalgate: black-box, a run stopped mid-eval in its own process, then resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalgate.evidence import journal
from tests.conftest import (
    QUICK,
    deadline,
    finish,
    json_values,
    load_result,
    load_samples,
    run_args,
    start_subprocess,
    temp_file,
)
from tests.fakeengine import FakeEngine
from tests.folders import SMALL_RUN, mid_eval

HEADER = ["model", "engine_version", "served", "api", "task_sha256", "dataset_sha256"]


HEADER += ["max_tokens", "questions"]


LINE = ["key", "doc_id", "text", "finish_reason", "completion_tokens", "source", "reasoning"]


LINE += ["reasoning_tokens"]


"""A journal's header and answer lines, key by key in their order, as evalgate writes them."""


OLDEST = ["key", "doc_id", "text", "finish_reason", "completion_tokens"]


"""An answer line as evalgate wrote it before it kept the answer's field and reasoning."""


def interrupted(engine: FakeEngine, out: Path) -> list[dict[str, object]]:
    """A run stopped by SIGTERM after two answers: its journal's lines, header first."""
    with mid_eval(engine, *run_args(engine.url, out, **SMALL_RUN)):
        pass
    return [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("form", ["as written", "oldest form"])
@pytest.mark.loopback
def test_a_journal_in_its_recorded_format_is_resumed(engine, tmp_path, form):
    out = tmp_path / "run"
    with deadline(300, engine):
        lines = interrupted(engine, out)
        assert list(lines[0]) == ["fingerprint"] and list(lines[0]["fingerprint"]) == HEADER
        assert [list(line) for line in lines[1:]] == [LINE, LINE]
        if form == "oldest form":
            older = [lines[0]] + [{k: line[k] for k in OLDEST} for line in lines[1:]]
            (out / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in older))
        code, _, err = finish(
            start_subprocess(*run_args(engine.url, out, "--resume", **SMALL_RUN)), 120
        )
        assert code == 0, err
        clean = tmp_path / "clean"
        assert finish(start_subprocess(*run_args(engine.url, clean, **SMALL_RUN)), 120)[0] == 0

    doc = load_result(out)
    assert doc["eval"]["requests"]["resumed"] == 2, err
    assert load_samples(out) == load_samples(clean)  # the kept answers, as if never stopped


@pytest.mark.loopback
def test_junk_lines_in_a_journal_are_neither_counted_nor_kept(engine, tmp_path):
    """150,000 answer-shaped lines to no question of the run: on 8c36240 the log said "150002
    answers reused" where result.json said 2, and every junk line was written back."""
    out = tmp_path / "run"
    with deadline(300, engine):
        lines = interrupted(engine, out)
        answer = lines[1]
        junk = "".join(
            json.dumps(answer | {"key": f"{n:064x}", "doc_id": n % 1000}) + "\n"
            for n in range(150_000)
        )
        with (out / "journal.jsonl").open("a") as journal:
            journal.write(junk)
        code, _, err = finish(
            start_subprocess(*run_args(engine.url, out, "--resume", **SMALL_RUN)), 240
        )

    assert code == 0, err
    assert "resuming: 2 answers from " in err
    assert "(150000 answering no question of this run are dropped)" in err
    doc = load_result(out)
    assert doc["eval"]["requests"]["resumed"] == 2
    kept = (out / "journal.jsonl").read_text().splitlines()
    assert len(kept) == 1 + doc["eval"]["questions"]  # the header, and one line per question


# Any journal is read as answers, its bad lines ignored, never a crash.


@QUICK
@given(st.lists(st.one_of(st.text(max_size=40), json_values.map(json.dumps)), max_size=5))
@pytest.mark.unit
def test_a_journal_is_read_as_answers_or_ignored_never_a_crash(lines):
    fingerprint = {"model": "m"}
    header = json.dumps({"fingerprint": fingerprint})
    path = temp_file("\n".join([header, *lines]).encode())
    try:
        kept = journal.read_journal(path, fingerprint)
        other = journal.read_journal(path, {"model": "another"})
    finally:
        path.unlink()

    assert other == {}  # another engine's or protocol's answers are never reused
    assert all(isinstance(k, str) and v.prompt_sha256 == k for k, v in kept.items())
