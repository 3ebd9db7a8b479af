"""The evidence contract: evidence/model.py states it, the schemas are generated from it, and the
one reader holds every file to it, with the answers evalgate gave before (26c619c). The verdict
and comparison documents are stated by their types too (verify/document.py,
compare/document.py), and their generated schemas answer as the hand-written ones of 3df58c7.

data/documents holds a valid result.json, samples.jsonl line and hook.json, and a verdict and a
comparison as 3df58c7 wrote them (paths made relative, lists cut short); data/schemas-26c619c
holds the hand-written schemas of 26c619c, the last before generation, and data/schemas-3df58c7
the verdict's and the comparison's, the last written by hand. A document refused then is refused
now, by the reader and by the generated schema; one accepted then is accepted now.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from msgspec import inspect

from evalgate import schemas
from evalgate.compare.views import ComparisonDocument
from evalgate.errors import ArtifactError
from evalgate.evidence.journal import JournalLine
from evalgate.evidence.model import INT64, HookSummary, Result, Sample
from evalgate.history.record import Asked
from evalgate.reader import decode
from evalgate.schemas import FROZEN, HERE, TYPES, generate, validation_errors, validator
from evalgate.thresholds import ThresholdsFile
from evalgate.verify.document import VerdictDocument
from evalgate.verify.harness_runs import LineRecord

DATA = Path(__file__).parent / "data"


KINDS = {"result": Result, "sample": Sample, "hook": HookSummary}


OLD = {
    name: Draft202012Validator(
        json.loads((DATA / "schemas-26c619c" / f"{name}.schema.json").read_text("utf-8"))
    )
    for name in KINDS
}


OUTPUTS = ("verdict", "comparison")


"""Documents evalgate writes and never reads: held to their schemas alone."""


OLD.update(
    (
        name,
        Draft202012Validator(
            json.loads((DATA / "schemas-3df58c7" / f"{name}.schema.json").read_text("utf-8"))
        ),
    )
    for name in OUTPUTS
)


DELETE = object()


def document(name: str) -> Any:
    return json.loads((DATA / "documents" / f"{name}.json").read_text("utf-8"))


def reads(name: str, doc: Any) -> bool:
    try:
        decode(json.dumps(doc), KINDS[name], "the document")
    except ArtifactError:
        return False
    return True


def changed(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@pytest.mark.unit
@pytest.mark.parametrize("name", TYPES)
def test_the_schema_files_are_generated_from_the_model(name):
    checked_in = (schemas.HERE / f"{name}.schema.json").read_text("utf-8")
    assert checked_in == generate(name), "run: python -m evalgate.schemas"


@pytest.mark.loopback
def test_deleting_the_schemas_and_running_the_generator_gives_every_file_back(tmp_path):
    """The generator, in its own process, writes into an empty folder every schema shipped,
    byte for byte; the others shipped are the frozen ones of earlier versions."""
    done = subprocess.run(
        [sys.executable, "-m", "evalgate.schemas", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    generated = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    shipped = {path.name: path.read_bytes() for path in schemas.HERE.glob("*.json")}
    assert sorted(generated) == sorted(f"{name}.schema.json" for name in TYPES)
    assert sorted(shipped) == sorted([*generated, *(f"{name}.schema.json" for name in FROZEN)])
    assert {name: shipped[name] for name in generated} == generated


def _unbounded_integers(kind: Any) -> list[str]:
    """The JSON paths of integers a type leaves past 64 bits (a Struct met twice: once)."""
    found: list[str] = []
    seen: set[type] = set()

    def walk(info: inspect.Type, path: str) -> None:
        if isinstance(info, inspect.IntType):
            low = info.ge if info.ge is not None else info.gt and info.gt + 1
            high = info.le if info.le is not None else info.lt and info.lt - 1
            if low is None or high is None or low < -INT64 or high >= INT64:
                found.append(path)
        elif isinstance(info, inspect.StructType) and info.cls not in seen:
            seen.add(info.cls)
            for field in info.fields:
                walk(field.type, f"{path}.{field.encode_name}")
        elif isinstance(info, inspect.ListType | inspect.VarTupleType):
            walk(info.item_type, f"{path}[]")
        elif isinstance(info, inspect.DictType):
            walk(info.value_type, f"{path}{{}}")
        elif isinstance(info, inspect.UnionType):
            for member in info.types:
                walk(member, path)
        elif isinstance(info, inspect.Metadata):
            walk(info.type, path)

    walk(inspect.type_info(kind), "$")
    return found


@pytest.mark.unit
@pytest.mark.parametrize(
    "kind",
    [
        *(Result, Sample, HookSummary, JournalLine, Asked, LineRecord, ThresholdsFile),
        *(VerdictDocument, ComparisonDocument),
    ],
    ids=lambda kind: kind.__name__,
)
def test_every_integer_of_a_typed_document_is_bounded_to_64_bits_by_its_type(kind):
    """msgspec refuses one past its bound as it decodes, naming its path: the reader scans
    only plain values (lm-eval's results, model configs) for integers past a float."""
    assert _unbounded_integers(kind) == []


@pytest.mark.unit
@pytest.mark.parametrize("name", KINDS)
def test_todays_documents_are_valid_to_both_schemas_and_the_reader(name):
    doc = document(name)
    assert OLD[name].is_valid(doc)
    assert validation_errors(name, doc) == []
    assert reads(name, doc)


REFUSED = [
    ("result", ("schema",), "evalgate.result/2"),
    ("result", ("schema",), DELETE),
    ("result", ("extra",), 1),
    ("result", ("labels", "gpu"), "b200"),
    ("result", ("run_id",), ""),
    ("result", ("status",), "great"),
    ("result", ("exit_code",), -1),
    ("result", ("timings", "eval"), -0.5),
    ("result", ("scores", 0, "value"), 1.5),
    ("result", ("scores", 0, "n"), -1),
    ("result", ("scores",), DELETE),
    ("result", ("checks",), DELETE),
    ("result", ("warnings",), DELETE),
    ("result", ("error",), {"type": "X"}),
    ("result", ("labels", "isl"), "1024"),
    ("result", ("labels", "topology", "tp"), 1.5),
    ("result", ("endpoint", "api"), "grpc"),
    ("result", ("context", "eval_max_model_len"), 0),
    ("result", ("context", "native", "value"), -1),
    ("result", ("probe", "outcome"), "fine"),
    ("result", ("eval", "task_version"), None),
    ("result", ("eval", "num_concurrent"), 0),
    ("result", ("eval", "temperature"), None),
    ("result", ("eval", "questions"), -1),
    ("result", ("eval", "dataset", "location"), None),
    ("result", ("eval", "requests", "total"), DELETE),
    ("result", ("eval", "requests", "retried"), None),
    ("result", ("eval", "requests", "reasoning_tokens", "answers"), 0),
    ("result", ("eval", "early_stop", "alpha"), 1.0),
    ("result", ("eval", "early_stop", "decision"), "maybe"),
    ("result", ("eval", "early_stop", "filters", 0, "e_value"), -1),
    ("result", ("threshold", "value"), 1.2),
    ("result", ("checks", 0, "outcome"), "great"),
    ("result", ("verdict", "min_samples"), -1),
    ("sample", ("doc_id",), -1),
    ("sample", ("error",), DELETE),
    ("sample", ("filters",), DELETE),
    ("sample", ("answer_field",), "body"),
    ("sample", ("filters", "strict-match", "correct"), "yes"),
    ("sample", ("cluster",), -1),
    ("sample", ("extra",), 1),
    ("hook", ("stopped",), DELETE),
    ("hook", ("concurrencies", 0), 0),
    ("hook", ("runs", 0, "status"), "done"),
    ("hook", ("runs", 0, "exit_code"), -1),
]


@pytest.mark.unit
@pytest.mark.parametrize(("name", "path", "value"), REFUSED)
def test_a_document_refused_today_is_refused_now(name, path, value):
    doc = changed(document(name), path, value)
    assert not OLD[name].is_valid(doc)  # refused by 26c619c's schema
    assert not reads(name, doc)
    assert validation_errors(name, doc) != []


@pytest.mark.unit
@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("exit_code",), 0.0, "$.exit_code: Expected `int`, got `float`"),
        (("eval", "early_stop", "prior_weight"), DELETE, "missing required field `prior_weight`"),
        (("scores", 0, "n"), 2**63, f"$.scores[0].n: Expected `int` <= {INT64 - 1}"),
    ],
    ids=["integer written 1.0", "prior_weight missing", "integer past 64 bits"],
)
def test_what_the_old_schema_allowed_but_its_reader_refused_stays_refused(path, value, says):
    """26c619c's schema allowed these; its reader (msgspec.convert into the model) did not."""
    doc = changed(document("result"), path, value)
    assert OLD["result"].is_valid(doc)
    with pytest.raises(ArtifactError) as refused:
        decode(json.dumps(doc), Result, "result.json", "is not a valid evalgate result")
    assert says in refused.value.message


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3000)
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "pass", "chat", "fit", "strict-match", "content", "x"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["value", "source", "n", "type", "message", "extra"]), inner, max_size=3
        )
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, name: str) -> Any:
    doc = document(name)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        if action == "replace":
            parent[path[-1]] = draw(JSON)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "value", "n", "stderr"]))] = draw(JSON)
    return doc


def _floats_that_are_integers(node: Any) -> bool:
    """1.0 is an integer to JSON Schema, not to the model (both then and now)."""
    if isinstance(node, float):
        return node.is_integer()
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    return any(_floats_that_are_integers(child) for child in children)


def _past_64_bits(node: Any) -> bool:
    """A whole number past 64 bits (9.3e18 is one to JSON Schema): the models always refused
    one in an integer field, and the generated schemas now say so; 26c619c's and 3df58c7's
    hand-written ones stated no bound."""
    if isinstance(node, int | float) and not isinstance(node, bool):
        return float(node).is_integer() and abs(node) >= INT64
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    return any(_past_64_bits(child) for child in children)


def _lacks_prior_weight(name: str, doc: Any) -> bool:
    """The one key 26c619c's schema left optional and its model required (now both do)."""
    stop = doc.get("eval", {}) if name == "result" and isinstance(doc, dict) else {}
    stop = stop.get("early_stop") if isinstance(stop, dict) else None
    return isinstance(stop, dict) and "prior_weight" not in stop


@pytest.mark.unit
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(KINDS)))
def test_a_changed_document_gets_the_answer_it_got_before(data, name):
    doc = data.draw(mutated(name))
    before, schema, now = OLD[name].is_valid(doc), validator(name).is_valid(doc), reads(name, doc)
    if now:
        assert before and schema
    if before and not _floats_that_are_integers(doc) and not _lacks_prior_weight(name, doc):
        assert now
    expected = before and not _lacks_prior_weight(name, doc)
    assert schema == expected or (_past_64_bits(doc) and not schema)


@pytest.mark.unit
@pytest.mark.parametrize("name", OUTPUTS)
def test_the_documents_3df58c7_wrote_are_valid_to_both_schemas(name):
    doc = document(name)
    assert OLD[name].is_valid(doc)
    assert validation_errors(name, doc) == []


OUTPUT_CHANGES = [
    ("verdict", ("baseline",), DELETE, True),
    ("verdict", ("counts", "regression"), DELETE, True),
    ("verdict", ("entries", 0, "versus"), DELETE, True),
    ("verdict", ("entries", 0, "versus"), None, True),
    ("verdict", ("expect",), None, True),
    ("comparison", ("method", "repeats"), DELETE, True),
    ("comparison", ("changed", 0, "detail"), "why", True),
    ("verdict", ("schema",), "evalgate.verdict/1", False),
    ("verdict", ("exit_code",), 2, False),
    ("verdict", ("confidence",), 0, False),
    ("verdict", ("min_samples",), -1, False),
    ("verdict", ("counts", "pass"), DELETE, False),
    ("verdict", ("counts", "expired"), -1, False),
    ("verdict", ("counts", "worse"), 1, False),
    ("verdict", ("expect", "count"), 0, False),
    ("verdict", ("expect", "configs"), DELETE, False),
    ("verdict", ("entries", 0, "key"), "", False),
    ("verdict", ("entries", 0, "task"), "", False),
    ("verdict", ("entries", 0, "task"), DELETE, False),
    ("verdict", ("entries", 0, "source"), "history", False),
    ("verdict", ("entries", 0, "outcome"), "worse", False),
    ("verdict", ("entries", 0, "checks", 0, "ci_low"), 1.5, False),
    ("verdict", ("entries", 0, "checks", 0, "threshold"), -0.1, False),
    ("verdict", ("entries", 0, "checks", 0, "matched"), DELETE, False),
    ("verdict", ("entries", 0, "versus", "standing"), "worse", False),
    ("verdict", ("entries", 0, "versus", "difference"), -1.5, False),
    ("verdict", ("entries", 0, "versus", "waiver"), DELETE, False),
    ("verdict", ("entries", 0, "versus", "waiver"), {"config": "x"}, False),
    ("verdict", ("entries", 0, "versus", "lost_questions", 0, "change"), "lost", False),
    ("verdict", ("baseline", "missing", 0, "extra"), 1, False),
    ("verdict", ("baseline", "unused_waivers", 0), {"config": "x"}, False),
    ("verdict", ("ignored", 0, "path"), None, False),
    ("comparison", ("schema",), "evalgate.comparison/2", False),
    ("comparison", ("exit_code",), 4, False),
    ("comparison", ("verdict",), "worse", False),
    ("comparison", ("method", "test"), DELETE, False),
    ("comparison", ("baseline", "labels"), None, False),
    ("comparison", ("changed", 0, "detail"), None, False),
    ("comparison", ("excluded", "unpaired", 0), -1, False),
    ("comparison", ("filters",), [], False),
    ("comparison", ("filters", 0, "design_effect"), 0.5, False),
    ("comparison", ("filters", 0, "questions_to_settle"), 0, False),
    ("comparison", ("filters", 0, "flips", 0, "change"), "same", False),
    ("comparison", ("filters", 0, "extra"), 1, False),
]


@pytest.mark.unit
@pytest.mark.parametrize(("name", "path", "value", "valid"), OUTPUT_CHANGES)
def test_a_verdict_or_comparison_changed_gets_the_answer_it_got_before(name, path, value, valid):
    doc = changed(document(name), path, value)
    assert OLD[name].is_valid(doc) is valid
    assert (validation_errors(name, doc) == []) is valid


def _negative_stderr(doc: Any) -> bool:
    """A check's stderr below 0: 3df58c7's schema refused it, while the verdict writes the
    result's as recorded, which the result's contract leaves unbounded (as the generated
    schema states)."""
    entries = doc.get("entries") if isinstance(doc, dict) else None
    return isinstance(entries, list) and any(
        isinstance(check, dict)
        and isinstance(check.get("stderr"), int | float)
        and not isinstance(check.get("stderr"), bool)
        and check["stderr"] < 0
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("checks"), list)
        for check in entry["checks"]
    )


def _same_answer(name: str, doc: Any) -> None:
    before, now = OLD[name].is_valid(doc), validator(name).is_valid(doc)
    if _negative_stderr(doc):
        assert now or not before
    else:
        assert now == before or (_past_64_bits(doc) and not now), json.dumps(doc)[:2000]


def _shapes(doc: Any) -> list[tuple[Any, ...]]:
    """One path of each shape (the same keys, any index): every place the schemas speak of."""
    shapes: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for path in _paths(doc)[1:]:
        shapes.setdefault(tuple("[]" if isinstance(p, int) else p for p in path), path)
    return list(shapes.values())


VALUES = [DELETE, None, True, 0, -1, 2, 0.5, 1.5, -0.5, "", "x", "pass", [], ["x"], {}, {"x": 1}]


@pytest.mark.unit
@pytest.mark.parametrize("name", OUTPUTS)
def test_every_change_in_every_place_of_a_verdict_or_comparison_gets_the_answer_it_got_before(
    name,
):
    doc = document(name)
    for path in _shapes(doc):
        for value in VALUES:
            _same_answer(name, changed(doc, path, value))
    for path in [(), *_shapes(doc)]:
        parent = doc
        for part in path:
            parent = parent[part]
        if isinstance(parent, dict):
            _same_answer(name, changed(doc, (*path, "extra"), 1))


@pytest.mark.unit
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(OUTPUTS))
def test_any_changes_to_a_verdict_or_comparison_get_the_answer_they_got_before(data, name):
    _same_answer(name, data.draw(mutated(name)))


# A config's identity includes its task: a GSM8K run and a GPQA-diamond run of one model, hardware
# and topology are two results in verify's table, in --expect, in --baseline pairing and in every
# report (docs/verify.md, "How a config and a run are identified"); verdicts are
# evalgate.verdict/2, and verdict/1's schema stays, frozen, for the documents already written.


@pytest.mark.loopback
def test_verdict_1_stays_frozen_for_the_documents_already_written():
    """A verdict written by evalgate before verdict/2 (kept in tests/verify/data) is valid
    against schemas/verdict-1.schema.json, whose text never changes, and not against today's."""
    frozen = HERE / "verdict-1.schema.json"
    assert hashlib.sha256(frozen.read_bytes()).hexdigest() == (
        "60c7b82476edd1cdf0b93a62f8eac5a77885ae3573ec9c89164aebeb7621273d"
    )
    written = json.loads((DATA / "verdict-1.json").read_text())
    assert written["schema"] == "evalgate.verdict/1"
    assert validation_errors("verdict-1", written) == []
    assert validation_errors("verdict", written) != []
