"""Token-set ratio (docs/contract.md#fuzzy-ratio): every worked example plus the definition's properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopsimrl.env.fuzzy import ratio, token_set_ratio, tokens


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("黑色 | 白色", "黑色/白色", 100),
        ("m", "M", 100),
        ("大号 加厚", "加厚", 100),
        ("黑色", "白色", 50),
        ("深海blue色", "天空blue款", 57),
        ("主动降噪", "降噪", 67),
        ("xl", "XL码", 80),
    ],
)
def test_spec_examples(a: str, b: str, expected: int) -> None:
    assert token_set_ratio(a, b) == expected
    assert token_set_ratio(b, a) == expected


def test_tokens_split_on_unicode_non_word_runs_and_casefold() -> None:
    assert tokens("黑色 | 白色") == {"黑色", "白色"}
    assert tokens("XL码/Ｍ号") == {"xl码", "ｍ号"}
    assert tokens("a_b-c") == {"a_b", "c"}  # "_" is a word character
    assert tokens("Straße") == {"strasse"}


def test_ratio_uses_bankers_rounding() -> None:
    assert ratio("ab", "abc") == 80  # 2*2/5
    assert ratio("a", "abcdefg") == 25  # 2*1/8
    assert ratio("ab", "bcdefghijklmno") == 12  # 2*1/16 = 12.5 → banker's rounding gives 12, not 13


def test_threshold_neighbours() -> None:
    # The reward uses "> 85": 86 matches, 85 would not.
    assert token_set_ratio("abcdefg", "abcdefgh") == 93
    assert token_set_ratio("abcdef", "abcdefgh") == 86


def test_empty_values_follow_difflib() -> None:
    assert token_set_ratio("", "") == 100  # difflib: two empty sequences are identical
    assert token_set_ratio("--", "！") == 100
    assert token_set_ratio("黑色", "") == 0


values = st.text(alphabet=st.sampled_from(list("黑白色大小号 |/-xlXLmM码加厚")), max_size=12)


@settings(max_examples=200)
@given(a=values, b=values)
def test_range_case_and_subset_properties(a: str, b: str) -> None:
    score = token_set_ratio(a, b)
    assert 0 <= score <= 100
    assert token_set_ratio(a.upper(), b) == score
    assert token_set_ratio(a, a) == 100
    left, right = tokens(a), tokens(b)
    if left and right and (left <= right or right <= left):
        assert score == 100


@settings(max_examples=200)
@given(a=values, b=values)
def test_matches_the_definition_step_by_step(a: str, b: str) -> None:
    left, right = tokens(a), tokens(b)
    common = " ".join(sorted(left & right))
    joined_left = " ".join(sorted((left & right) | (left - right)))
    joined_right = " ".join(sorted((left & right) | (right - left)))
    expected = (
        ratio(joined_left, joined_right)
        if not common
        else max(ratio(common, joined_left), ratio(common, joined_right), ratio(joined_left, joined_right))
    )
    assert token_set_ratio(a, b) == expected
