import pytest

from sagents.core._permissions import ToolAnnotations, classify_annotations, parse_permission_mode


@pytest.mark.parametrize(
    ("annotations", "task_support", "expected"),
    [
        (None, None, "destructive"),
        (ToolAnnotations(), None, "destructive"),
        (ToolAnnotations(read_only_hint=True), None, "read_only"),
        (ToolAnnotations(read_only_hint=True, destructive_hint=True), None, "read_only"),
        (ToolAnnotations(read_only_hint=False, destructive_hint=False), None, "write"),
        (ToolAnnotations(destructive_hint=False), None, "write"),
        (ToolAnnotations(read_only_hint=False), None, "destructive"),
        (ToolAnnotations(read_only_hint=True), "required", "long_task_only"),
        (None, "optional", "destructive"),
    ],
)
def test_annotations_map_to_permission_classes_with_mcp_defaults(
    annotations: ToolAnnotations | None, task_support: str | None, expected: str
) -> None:
    assert classify_annotations(annotations, task_support=task_support) == expected


@pytest.mark.parametrize(
    ("spelling", "mode"),
    [("ask", "ask"), ("AUTO", "auto"), ("read-only", "read_only"), ("read_only", "read_only")],
)
def test_permission_mode_spellings(spelling: str, mode: str) -> None:
    assert parse_permission_mode(spelling) == mode


def test_unknown_permission_mode_lists_accepted_spellings() -> None:
    with pytest.raises(ValueError, match="ask, auto, read-only"):
        parse_permission_mode("yolo")
