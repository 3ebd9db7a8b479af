"""The evidence contract: evidence/model.py states it, the schemas are generated from it, and the
one reader holds every file to it, with the answers evalgate gave before (26c619c).

data/documents holds a valid result.json, samples.jsonl line and hook.json; data/schemas-26c619c
holds the hand-written schemas of 26c619c, the last before generation. A document refused then
is refused now, by the reader and by the generated schema; one accepted then is accepted now.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from evalgate import schemas
from evalgate.errors import ArtifactError
from evalgate.evidence.model import HookSummary, Result, Sample
from evalgate.evidence.read import decode
from evalgate.schemas import validation_errors, validator
from evalgate.schemas.generated import TYPES, generate

DATA = Path(__file__).parent / "data"
KINDS = {"result": Result, "sample": Sample, "hook": HookSummary}
OLD = {
    name: Draft202012Validator(
        json.loads((DATA / "schemas-26c619c" / f"{name}.schema.json").read_text("utf-8"))
    )
    for name in KINDS
}
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


@pytest.mark.parametrize("name", TYPES)
def test_the_schema_files_are_generated_from_the_model(name):
    checked_in = (schemas.HERE / f"{name}.schema.json").read_text("utf-8")
    assert checked_in == generate(name), "run: python -m evalgate.schemas"


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


@pytest.mark.parametrize(("name", "path", "value"), REFUSED)
def test_a_document_refused_today_is_refused_now(name, path, value):
    doc = changed(document(name), path, value)
    assert not OLD[name].is_valid(doc)  # refused by 26c619c's schema
    assert not reads(name, doc)
    assert validation_errors(name, doc) != []


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("exit_code",), 0.0, "$.exit_code: Expected `int`, got `float`"),
        (("eval", "early_stop", "prior_weight"), DELETE, "missing required field `prior_weight`"),
    ],
    ids=["integer written 1.0", "prior_weight missing"],
)
def test_what_the_old_schema_allowed_but_its_reader_refused_stays_refused(path, value, says):
    """26c619c's schema allowed these; its reader (msgspec.convert into the model) did not."""
    doc = changed(document("result"), path, value)
    assert OLD["result"].is_valid(doc)
    with pytest.raises(ArtifactError) as refused:
        decode(json.dumps(doc), Result, "result.json", "is not a valid evalgate result")
    assert says in refused.value.message


# -- any change to a valid document keeps its answer --------------------------------------------

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


def _lacks_prior_weight(name: str, doc: Any) -> bool:
    """The one key 26c619c's schema left optional and its model required (now both do)."""
    stop = doc.get("eval", {}) if name == "result" and isinstance(doc, dict) else {}
    stop = stop.get("early_stop") if isinstance(stop, dict) else None
    return isinstance(stop, dict) and "prior_weight" not in stop


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(KINDS)))
def test_a_changed_document_gets_the_answer_it_got_before(data, name):
    doc = data.draw(mutated(name))
    before, schema, now = OLD[name].is_valid(doc), validator(name).is_valid(doc), reads(name, doc)
    if now:
        assert before and schema
    if before and not _floats_that_are_integers(doc) and not _lacks_prior_weight(name, doc):
        assert now
    assert schema == (before and not _lacks_prior_weight(name, doc))
