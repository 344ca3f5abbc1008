"""Tag and SQL92 filters parse, bound and evaluate with RocketMQ's semantics."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.broker import filters as flt
from ariane.broker import settings as broker_settings
from ariane.common import errors, hashing


def test_java_string_hash_matches_java() -> None:
    """Known values of Java's String.hashCode, including overflow and a surrogate pair."""
    assert hashing.java_string_hash("") == 0
    assert hashing.java_string_hash("TagA") == 2598919
    assert hashing.java_string_hash("hello world") == 1794106052
    assert hashing.java_string_hash("polygenelubricants") == -2147483648
    assert hashing.java_string_hash("\U0001f600") == 1772899  # "😀" = two UTF-16 units
    assert hashing.to_int32(2**32 + 5) == 5 and hashing.to_int32(2**31) == -(2**31)


@pytest.mark.parametrize("expression", ["*", "", "   ", " * "])
def test_star_and_empty_tag_expressions_match_everything(expression: str) -> None:
    """'*' and blank subscriptions accept every message, tagged or not."""
    tags = flt.parse_tags(expression)
    assert tags.matches_all
    assert tags.matches(None, {}) and tags.matches_tag_hash(12345)


def test_tag_lists_match_by_hash_then_by_exact_tag() -> None:
    """'a || b' accepts hashes of a and b, then only the exact tags (collisions rejected)."""
    tags = flt.parse_tags(" TagA ||TagB||  ")
    assert tags.tags == {"TagA", "TagB"}
    assert tags.matches_tag_hash(hashing.java_string_hash("TagB"))
    assert tags.matches_tag_hash(hashing.java_string_hash("TagA") & 0xFFFF_FFFF)  # unsigned form
    assert not tags.matches_tag_hash(hashing.java_string_hash("TagC"))
    assert hashing.java_string_hash("Aa") == hashing.java_string_hash("BB")  # a real collision
    colliding = flt.parse_tags("Aa")
    assert colliding.matches_tag_hash(hashing.java_string_hash("BB"))
    assert not colliding.matches("BB", {}) and colliding.matches("Aa", {})
    assert not tags.matches(None, {})


def test_tag_expression_bounds() -> None:
    """An expression of separators only, too many tags or too many characters is illegal."""
    limits = broker_settings.FilterSettings(tags_max=2, expression_chars_max=20)
    for bad in ("||", "a||b||c", "x" * 21):
        with pytest.raises(errors.IllegalFilterExpressionError):
            flt.parse_tags(bad, limits=limits)


PROPS = {"a": "3", "b": "y", "price": "12.5", "neg": "-4", "flag": "TRUE", "word": "hello"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("a = 3", True),
        ("a = '3'", True),
        ("a <> 3", False),
        ("a > 2 AND a < 4", True),
        ("a >= 3.0", True),
        ("price > 12", True),
        ("price <= 12.5", True),
        ("neg < -3", True),
        ("a BETWEEN 1 AND 3", True),
        ("a BETWEEN 4 AND 9", False),
        ("a NOT BETWEEN 4 AND 9", True),
        ("b IN ('x', 'y')", True),
        ("b NOT IN ('x', 'y')", False),
        ("missing IS NULL", True),
        ("a IS NOT NULL", True),
        ("flag = TRUE", True),
        ("word CONTAINS 'ell'", True),
        ("word NOT CONTAINS 'ell'", False),
        ("word STARTSWITH 'he' AND word ENDSWITH 'lo'", True),
        ("word NOT STARTSWITH 'x'", True),
        ("NOT a = 1", True),
        ("not (a = 3 or b = 'z')", False),
        ("TRUE", True),
        ("FALSE OR a = 3", True),
        ("a = 3 -- trailing comment\n", True),
        ("/* lead */ b = 'y'", True),
        ("b = 'it''s'", False),
        ("word = 'hello' AND (a = 1 OR (b = 'y' AND price > 10))", True),
    ],
)
def test_sql_expressions_evaluate_like_rocketmq(expression: str, expected: bool) -> None:
    """Numeric and string comparisons, BETWEEN, IN, IS NULL, 5.x string tests, NOT/AND/OR."""
    assert flt.parse_sql(expression).matches("tag", PROPS) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "missing = 1",
        "missing > 1",
        "missing BETWEEN 1 AND 2",
        "missing IN ('a')",
        "missing NOT IN ('a')",
        "word > 1",
        "word = 3",
        "missing",
        "NOT missing = 1",
    ],
)
def test_missing_or_non_numeric_values_make_comparisons_unknown(expression: str) -> None:
    """Unknown is neither TRUE nor FALSE, and NOT of unknown stays unknown: no match."""
    compiled = flt.parse_sql(expression)
    assert compiled.evaluate(PROPS) is None
    assert not compiled.matches(None, PROPS)


def test_string_tests_on_a_missing_property_are_false_even_negated() -> None:
    """RocketMQ: CONTAINS and NOT CONTAINS are both false for a missing property or empty search."""
    for expression in ("missing CONTAINS 'x'", "missing NOT CONTAINS 'x'", "word CONTAINS ''"):
        assert flt.parse_sql(expression).evaluate(PROPS) is False


def test_a_bare_present_property_is_false() -> None:
    """RocketMQ's boolean cast: property values are strings, never booleans."""
    assert flt.parse_sql("flag").evaluate(PROPS) is False


def test_sql_filters_do_not_prefilter_on_tag_hashes() -> None:
    """Only tag filters can use the ConsumeQueue hash; SQL always passes it on."""
    compiled = flt.compile_filter(flt.FilterKind.SQL92, "TAGS = 'x'")
    assert compiled.matches_tag_hash(0) and compiled.matches("x", {"TAGS": "x"})
    assert isinstance(flt.compile_filter(flt.FilterKind.TAG, "x"), flt.TagFilter)


@pytest.mark.parametrize(
    ("expression", "position"),
    [
        ("a >", 3),
        ("a > 'x'", 2),
        ("a = NULL", 2),
        ("(a = 1", 6),
        ("a NOT = 1", 6),
        ("5", 0),
        ("a BETWEEN 3 AND 1", 2),
        ("a BETWEEN 'x' AND 'y'", 2),
        ("1 IN ('a')", 2),
        ("a IN (1)", 6),
        ("a # 1", 2),
        ("and = 1", 0),
        ("a = 'unterminated", 4),
        ("a = 1 b = 2", 6),
        ("TRUE = 'x'", 5),
        ("-a > 1", 0),
        ("a CONTAINS b", 11),
        ("/* open comment", 0),
    ],
)
def test_parse_errors_name_the_position(expression: str, position: int) -> None:
    """Every syntax or RocketMQ parse-time error is IllegalFilterExpressionError at a position."""
    with pytest.raises(errors.IllegalFilterExpressionError, match=f"at character {position}$"):
        flt.parse_sql(expression)


def test_sql_bounds_on_length_depth_and_in_lists() -> None:
    """Over-long text, deep nesting and long IN lists are refused; long flat chains are fine."""
    limits = broker_settings.FilterSettings(
        expression_chars_max=200, expression_depth_max=4, in_list_items_max=3
    )
    with pytest.raises(errors.IllegalFilterExpressionError, match="characters"):
        flt.parse_sql("a = 1 OR " * 30 + "a = 1", limits=limits)
    with pytest.raises(errors.IllegalFilterExpressionError, match="expression_depth_max"):
        flt.parse_sql("((((( a = 1 )))))", limits=limits)
    with pytest.raises(errors.IllegalFilterExpressionError, match="expression_depth_max"):
        flt.parse_sql("NOT NOT NOT NOT NOT a = 1", limits=limits)
    with pytest.raises(errors.IllegalFilterExpressionError, match="in_list_items_max"):
        flt.parse_sql("a IN ('1', '2', '3', '4')", limits=limits)
    chain = " OR ".join(f"a = {n}" for n in range(300))
    assert flt.parse_sql(chain).matches(None, {"a": "299"})


# -- property tests -------------------------------------------------------------------------------

_PROP_NAMES = st.sampled_from(["a", "b", "price", "missing", "Word_2", "$x"])
_NUMBERS = st.one_of(
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)
_STRINGS = st.text(alphabet="xyz' 0123.", max_size=6)


def _operand(numeric: bool) -> st.SearchStrategy[flt.Operand]:
    literal = _NUMBERS if numeric else st.one_of(_NUMBERS, _STRINGS)
    return st.one_of(_PROP_NAMES.map(flt.Prop), literal.map(flt.Const))


def _leaf() -> st.SearchStrategy[flt.Node]:
    ordering = [op for op in flt.CompareOp if op not in (flt.CompareOp.EQ, flt.CompareOp.NE)]
    return st.one_of(
        st.builds(flt.Compare, st.sampled_from(ordering), _operand(True), _operand(True)),
        st.builds(
            flt.Compare,
            st.sampled_from([flt.CompareOp.EQ, flt.CompareOp.NE]),
            _operand(False),
            _operand(False),
        ),
        st.builds(
            lambda v, lo, hi, neg: flt.Between(
                v, flt.Const(min(lo, hi)), flt.Const(max(lo, hi)), neg
            ),
            _PROP_NAMES.map(flt.Prop),
            _NUMBERS,
            _NUMBERS,
            st.booleans(),
        ),
        st.builds(
            flt.In,
            _PROP_NAMES.map(flt.Prop),
            st.lists(_STRINGS, min_size=1, max_size=3).map(tuple),
            st.booleans(),
        ),
        st.builds(flt.IsNull, _operand(False), st.booleans()),
        st.builds(
            flt.TextMatch,
            st.sampled_from(list(flt.TextOp)),
            _operand(False),
            _STRINGS,
            st.booleans(),
        ),
        st.booleans().map(flt.BoolConst),
        _PROP_NAMES.map(lambda n: flt.BoolCast(flt.Prop(n))),
    )


_NODES = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        inner.map(flt.Not),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: flt.And(tuple(xs))),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: flt.Or(tuple(xs))),
    ),
    max_leaves=8,
)
_PROPERTY_MAPS = st.dictionaries(
    st.sampled_from(["a", "b", "price", "Word_2", "$x"]),
    st.one_of(st.integers(-50, 50).map(str), _STRINGS, st.just("12.5")),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(_NODES)
def test_rendered_expressions_parse_back_to_the_same_tree(node: flt.Node) -> None:
    """Any valid tree renders to text that parses back to an equal tree."""
    assert flt.parse_sql(flt.render(node)).root == node


@settings(max_examples=200, deadline=None)
@given(_NODES, _PROPERTY_MAPS)
def test_not_is_the_complement_where_the_value_is_known(
    node: flt.Node, properties: dict[str, str]
) -> None:
    """NOT (x) is TRUE exactly when x is FALSE; unknown stays unknown."""
    plain = flt.parse_sql(flt.render(node)).evaluate(properties)
    negated = flt.parse_sql(f"NOT ({flt.render(node)})").evaluate(properties)
    assert negated == (None if plain is None else not plain)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab01=<>()' ANDORTISNUL,.-", max_size=40))
def test_garbage_never_crashes_the_parser(text: str) -> None:
    """Random text either parses or raises IllegalFilterExpressionError, nothing else."""
    with contextlib.suppress(errors.IllegalFilterExpressionError):
        flt.parse_sql(text).evaluate(PROPS)
