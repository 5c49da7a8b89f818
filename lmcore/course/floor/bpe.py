"""Notebook 09, what a token is: UTF-8 bytes per character by script, and a toy byte-pair
encoder (BPE: merge the most frequent adjacent pair, again and again) whose merges shorten the
sequence while the text, and so its bytes, stay the same.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["bytes_per_character", "toy_bpe"]


def bytes_per_character(text: str) -> float:
    """UTF-8 bytes per character of ``text``: 1 for ASCII, 3 for most Chinese characters."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"text must be a non-empty str; got {text!r}.")
    return len(text.encode("utf-8")) / len(text)


def toy_bpe(text: str, merges: int) -> list[tuple[int, str]]:
    """Start from the characters of ``text``; ``merges`` times, replace every occurrence
    (left to right, not overlapping) of the most frequent adjacent pair by one new token (ties:
    the pair seen first). Returns ``[(sequence length, new token)]``, the first entry
    ``(len(text), "")`` before any merge; stops early when no pair occurs twice."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"text must be a non-empty str; got {text!r}.")
    if isinstance(merges, bool) or not isinstance(merges, int) or merges < 0:
        raise ValueError(f"merges must be an int >= 0; got {merges!r}.")
    seq, out = list(text), [(len(text), "")]
    for _ in range(merges):
        pairs = Counter(zip(seq, seq[1:]))
        if not pairs or max(pairs.values()) < 2:
            break
        best = max(pairs, key=pairs.get)  # the first pair with the highest count
        merged, i = [], 0
        while i < len(seq):
            if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                merged.append(seq[i] + seq[i + 1])
                i += 2
            else:
                merged.append(seq[i])
                i += 1
        seq = merged
        out.append((len(seq), best[0] + best[1]))
    return out
