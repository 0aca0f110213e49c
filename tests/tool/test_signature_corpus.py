"""The signature corpus: schemas snapshot-checked, strict exports proved equivalent on samples."""

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from sagents.errors import SchemaExportError
from sagents.tool._json_schema import iter_subschemas
from sagents.tool._local_tool import LocalTool, build_local_tool
from sagents.tool.openai_export import (
    faithful_schema,
    strict_absent_to_nulls,
    strict_nulls_to_absent,
    strict_schema,
    to_openai_tool,
)
from tests.tool import corpus_future, corpus_plain
from tests.tool.corpus_types import Case

CASES: list[Case] = [*corpus_future.CASES, *corpus_plain.CASES]
# Open maps and values of any type: faithful export only.
STRICT_UNSUPPORTED = {"dict_param", "any_param", "typing_generics"}


@pytest.fixture
def json_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def _tool(case: Case) -> LocalTool:
    return build_local_tool(case.func)


def _nodes(schema: Any, path: str = "") -> list[dict[str, Any]]:
    found = [schema] if isinstance(schema, dict) else []
    if isinstance(schema, dict):
        for _, child_path, child in iter_subschemas(schema, path):
            found.extend(_nodes(child, child_path))
    return found


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def test_the_corpus_has_at_least_thirty_signatures_with_samples() -> None:
    assert len(CASES) >= 30
    assert all(case.valid and case.invalid for case in CASES)
    assert len({case.func.__name__ for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.func.__name__)
def test_schemas_match_their_snapshot(case: Case, json_snapshot: SnapshotAssertion) -> None:
    spec = _tool(case).spec
    try:
        strict: Any = to_openai_tool(spec, strict=True)
    except SchemaExportError as error:
        strict = {"error": error.code, "path": error.details["path"]}
    document = {
        "description": spec.description,
        "input_schema": dict(spec.input_schema),
        "output_schema": spec.output_schema,
        "openai": to_openai_tool(spec),
        "openai_strict": strict,
    }
    assert document == json_snapshot


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.func.__name__)
def test_generated_schema_and_argument_model_agree_on_the_samples(case: Case) -> None:
    tool = _tool(case)
    original = Draft202012Validator(dict(tool.spec.input_schema))
    for sample in case.valid:
        assert original.is_valid(sample), sample
    for sample in case.invalid:
        assert not original.is_valid(sample), sample


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.func.__name__)
def test_faithful_export_accepts_exactly_what_the_original_accepts(case: Case) -> None:
    schema = dict(_tool(case).spec.input_schema)
    faithful = Draft202012Validator(faithful_schema(schema))
    original = Draft202012Validator(schema)
    for sample in [*case.valid, *case.invalid]:
        assert faithful.is_valid(sample) == original.is_valid(sample), sample


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.func.__name__ not in STRICT_UNSUPPORTED],
    ids=lambda c: c.func.__name__,
)
def test_strict_export_accepts_and_rejects_samples_as_the_original(case: Case) -> None:
    schema = dict(_tool(case).spec.input_schema)
    original = Draft202012Validator(schema)
    strict = strict_schema(schema)
    Draft202012Validator.check_schema(dict(strict.schema))
    assert all(list(n) == ["$ref"] for n in _nodes(strict.schema) if "$ref" in n)
    for sample in case.valid:
        sent = strict_absent_to_nulls(strict, sample)  # what a strict model sends
        assert strict.validator.is_valid(sent), (sample, sent)
        received = strict_nulls_to_absent(strict, sent)
        assert original.is_valid(received), (sample, received)
        assert _drop_nulls(received) == _drop_nulls(sample)
    for sample in case.invalid:
        sent = strict_absent_to_nulls(strict, sample)
        accepted = strict.validator.is_valid(sent) and original.is_valid(
            strict_nulls_to_absent(strict, sent)
        )
        assert not accepted, sample


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.func.__name__ in STRICT_UNSUPPORTED],
    ids=lambda c: c.func.__name__,
)
def test_strict_export_refuses_what_strict_mode_cannot_express(case: Case) -> None:
    schema = dict(_tool(case).spec.input_schema)
    with pytest.raises(SchemaExportError) as caught:
        strict_schema(schema)
    assert caught.value.details["path"].startswith("/properties/")
    assert "strict=False" in (caught.value.hint or "")
