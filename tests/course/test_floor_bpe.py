"""Notebook 09's bytes per character and toy BPE, on strings worked by hand."""

import pytest

from lmcore.course.floor.bpe import bytes_per_character, toy_bpe


def test_bytes_per_character_by_script():
    assert bytes_per_character("machine learning") == 1.0
    assert bytes_per_character("机器学习很有趣") == 3.0  # 21 bytes, 7 characters
    assert bytes_per_character("é!") == 1.5  # U+00E9 takes 2 bytes
    assert bytes_per_character("a😀") == 2.5  # an emoji takes 4
    with pytest.raises(ValueError):
        bytes_per_character("")


def test_toy_bpe_by_hand():
    # "abababab": (a,b) x4 -> 4 tokens "ab"; (ab,ab) x3 -> 2 tokens "abab" (left to right,
    # not overlapping); (abab,abab) occurs once: stop
    assert toy_bpe("abababab", 5) == [(8, ""), (4, "ab"), (2, "abab")]
    # ties go to the pair seen first: "aab aab" has (a,a), (a,b), (b, ), ( ,a) twice each
    assert toy_bpe("aab aab", 1) == [(7, ""), (5, "aa")]
    assert toy_bpe("abc", 3) == [(3, "")]
    assert toy_bpe("aaaa", 0) == [(4, "")]


def test_toy_bpe_never_loses_text():
    text = "the cat sat on the mat; the dog sat on the rug"
    rows = toy_bpe(text, 12)
    lengths = [n for n, _ in rows]
    assert lengths == sorted(lengths, reverse=True) and len(set(lengths)) == len(lengths)
    assert all(new in text for _, new in rows)


@pytest.mark.parametrize("text, merges", [("", 1), ("ab", -1), ("ab", 1.0), (b"ab", 1)])
def test_toy_bpe_validates(text, merges):
    with pytest.raises(ValueError):
        toy_bpe(text, merges)
