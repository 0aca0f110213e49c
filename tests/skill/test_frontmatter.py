import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from sagents.skill._frontmatter import (
    FrontMatterError,
    decode_text,
    load_yaml_document,
    load_yaml_mapping,
    split_front_matter,
)


def test_a_file_without_front_matter_is_all_body() -> None:
    split = split_front_matter("# Skill: X\n\ntext\n")
    assert split.front_matter is None
    assert split.body == "# Skill: X\n\ntext\n"


def test_a_dashes_line_indented_inside_a_block_scalar_does_not_close_the_front_matter() -> None:
    text = "---\nname: a\ndescription: |\n  one\n  ---\n  two\n---\nbody\n"
    split = split_front_matter(text)
    assert split.front_matter is not None
    assert load_yaml_mapping(split.front_matter)["description"] == "one\n---\ntwo\n"
    assert split.body == "body\n"


def test_an_inline_triple_dash_stays_in_the_value() -> None:
    split = split_front_matter("---\ndescription: a --- b\n---\nbody")
    assert split.front_matter is not None
    assert load_yaml_mapping(split.front_matter) == {"description": "a --- b"}


def test_an_unclosed_front_matter_is_an_error_naming_line_one() -> None:
    with pytest.raises(FrontMatterError, match="never closed") as caught:
        split_front_matter("---\nname: a\n")
    assert caught.value.line == 1


def test_decode_drops_the_bom_and_normalises_crlf_and_cr() -> None:
    assert decode_text(b"\xef\xbb\xbf---\r\nname: a\r---\n") == "---\nname: a\n---\n"


def test_decode_reports_invalid_utf8_with_its_offset() -> None:
    with pytest.raises(FrontMatterError, match="byte 2"):
        decode_text(b"ab\xff")


@pytest.mark.parametrize("source", ["- a\n- b\n", "just text\n", "42\n"])
def test_front_matter_that_is_not_a_mapping_is_refused(source: str) -> None:
    with pytest.raises(FrontMatterError, match="must be a mapping"):
        load_yaml_mapping(source)


def test_invalid_yaml_reports_the_file_line() -> None:
    with pytest.raises(FrontMatterError, match="invalid YAML") as caught:
        load_yaml_mapping("name: a\ndescription: [unclosed\n", first_line=2)
    assert caught.value.line is not None
    assert caught.value.line >= 3


def test_keys_that_yaml_reads_as_non_strings_are_kept_as_written_and_recorded() -> None:
    parsed = load_yaml_document("1: one\non: push\nmetadata: {2024: x}\n", first_line=2)
    assert parsed.data == {"1": "one", "on": "push", "metadata": {"2024": "x"}}
    assert [(key.key, key.line) for key in parsed.non_string_keys] == [
        ("1", 2),
        ("on", 3),
        ("2024", 4),
    ]


def test_a_key_that_is_a_sequence_is_still_refused() -> None:
    with pytest.raises(FrontMatterError, match="invalid YAML"):
        load_yaml_mapping("? [a, b]\n: x\n")


# NEL (U+0085) is left out: PyYAML's own dump/load does not round-trip it, with or without us.
_values = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00\ufeff\x85"),
    max_size=80,
)


@given(
    name=_values, description=_values, newline=st.sampled_from(["\n", "\r\n"]), bom=st.booleans()
)
def test_any_dumped_front_matter_round_trips_whatever_the_values(
    name: str, description: str, newline: str, bom: bool
) -> None:
    front = yaml.safe_dump({"name": name, "description": description}, allow_unicode=True)
    text = "---\n" + front + "---\nbody line\n---\nnot front matter\n"
    data = text.replace("\n", newline).encode("utf-8")
    if bom:
        data = b"\xef\xbb\xbf" + data
    split = split_front_matter(decode_text(data))
    assert split.front_matter is not None
    loaded = load_yaml_mapping(split.front_matter)
    assert loaded == {"name": name, "description": description}  # escapes survive CRLF files
    assert split.body == "body line\n---\nnot front matter\n"


@given(st.text(max_size=200))
def test_splitting_never_raises_anything_but_front_matter_errors(text: str) -> None:
    try:
        split = split_front_matter(text)
        if split.front_matter is not None:
            load_yaml_mapping(split.front_matter)
    except FrontMatterError:
        pass
