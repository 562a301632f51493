"""Prompt-lookup drafts: what follows the latest earlier match of the row's last n tokens."""

from __future__ import annotations

from tinytitan.engine.device.drafts import PromptLookup


def test_proposes_what_followed_the_longest_match() -> None:
    tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4]
    assert PromptLookup(k=3).propose(tokens) == [5, 6, 7]


def test_shorter_ngrams_are_tried_after_longer_ones() -> None:
    # no earlier (x, 3, 4) or (x, x, 3, 4)… but the bigram (3, 4) occurs: what followed it
    tokens = [9, 3, 4, 50, 51, 52, 8, 7, 3, 4]
    assert PromptLookup(k=2).propose(tokens) == [50, 51]


def test_the_latest_earlier_occurrence_wins() -> None:
    tokens = [1, 2, 10, 11, 1, 2, 20, 21, 1, 2]
    assert PromptLookup(k=2).propose(tokens) == [20, 21]


def test_a_four_gram_match_beats_a_later_bigram() -> None:
    tokens = [5, 6, 7, 8, 100, 0, 7, 8, 200, 0, 5, 6, 7, 8]
    assert PromptLookup(k=1).propose(tokens) == [100]


def test_nothing_when_nothing_matches_or_no_room() -> None:
    assert PromptLookup().propose([1, 2, 3, 4, 5]) == []
    assert PromptLookup().propose([]) == []
    assert PromptLookup().propose([1, 2, 1, 2], k=0) == []


def test_a_match_that_runs_into_the_suffix_continues_its_cycle() -> None:
    assert PromptLookup(k=8).propose([1, 2, 3, 1, 2]) == [3, 1, 2, 3, 1, 2, 3, 1]
    assert PromptLookup(k=3).propose([5, 9, 9, 9]) == [9, 9, 9]


def test_a_match_at_the_very_end_proposes_nothing_from_itself() -> None:
    assert PromptLookup(k=1, ngrams=(2,)).propose([7, 7, 7]) == [7]  # the earlier (7, 7) is followed by 7


def test_a_lookup_that_follows_a_growing_row_equals_a_fresh_one() -> None:
    import random

    rng = random.Random(7)
    tokens = [rng.randrange(6) for _ in range(400)]
    follower = PromptLookup(k=5)
    for end in range(1, len(tokens)):
        assert follower.propose(tokens[:end]) == PromptLookup(k=5).propose(tokens[:end])
    assert follower.propose([3, 1, 3, 1]) == [3, 1, 3, 1, 3]  # not a continuation: indexed afresh
