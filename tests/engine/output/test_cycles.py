"""The verbatim-cycle detector (issue 26): what counts as a generation stuck in a loop, and what does not."""

from __future__ import annotations

import random

import pytest

from tinytitan.engine.output.cycles import Cycle, CycleDetector, _z_array, find_cycle

PARAGRAPH = (
    "The little fox ran down to the river every morning, looked at the water for a while, "
    "and then went back home to tell his mother what he had seen there. "
)  # 152 characters
PROSE = (
    "A story does not repeat itself word for word. The fox met an owl on Monday, a heron on "
    "Tuesday and nobody at all on Wednesday, which he spent asleep under an oak. "
)


def _words(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(n))


def feed(detector: CycleDetector, text: str, size: int = 7) -> tuple[Cycle | None, int]:
    """Feed ``text`` in pieces of ``size``; (the cycle, characters fed when it fired or in all)."""
    for start in range(0, len(text), size):
        cycle = detector.feed(text[start : start + size])
        if cycle is not None:
            return cycle, detector.fed
    return None, detector.fed


def test_the_z_array_matches_its_definition() -> None:
    rng = random.Random(3)
    for _ in range(200):
        s = "".join(rng.choice("ab") for _ in range(rng.randint(0, 40)))
        brute = []
        for i in range(len(s)):
            k = 0
            while i + k < len(s) and s[k] == s[i + k]:
                k += 1
            brute.append(k)
        assert _z_array(s) == brute


def test_a_paragraph_repeated_is_a_cycle_of_its_length() -> None:
    cycle = find_cycle("Chapter one. " + PARAGRAPH * 5)
    assert cycle is not None
    assert cycle.period == len(PARAGRAPH) and cycle.unit == PARAGRAPH
    assert 5 * len(PARAGRAPH) <= cycle.span < 5 * len(PARAGRAPH) + len("one. ")  # "e. " ends the prefix too
    assert int(cycle.repeats) == 5


def test_text_that_moves_on_is_not_a_cycle() -> None:
    assert find_cycle(_words(2000)) is None
    assert find_cycle(PROSE + PARAGRAPH + PROSE.upper() + PARAGRAPH) is None  # said twice, apart


def test_two_copies_are_not_enough_the_third_is() -> None:
    long_paragraph = PARAGRAPH * 2 + "And so it went on. "  # 329 characters, not itself periodic
    assert find_cycle(PROSE + long_paragraph * 2) is None
    assert find_cycle(PROSE + long_paragraph * 3) is not None


def test_a_short_refrain_or_rule_under_the_span_is_not_a_cycle() -> None:
    assert find_cycle(PROSE + "la la la " * 20) is None  # 180 characters
    assert find_cycle(PROSE + "-" * 80 + "\n" + PROSE) is None
    assert find_cycle(PROSE + "ha" * 400) is not None  # 800 characters of one syllable: stuck


def test_a_near_repetition_is_not_verbatim() -> None:
    copies = "".join(PARAGRAPH.replace("river", f"river {i}") for i in range(8))
    assert find_cycle(copies) is None


def test_the_detector_fires_once_the_span_is_reached_and_keeps_the_cycle() -> None:
    detector = CycleDetector(every=1)
    cycle, fed = feed(detector, PROSE + PARAGRAPH * 20)
    assert cycle is not None and cycle.period == len(PARAGRAPH)
    loop_start = len(PROSE)
    assert fed - loop_start <= max(detector.min_span, 3 * len(PARAGRAPH)) + len(PARAGRAPH)  # about 4 copies
    assert detector.feed("anything") is cycle and detector.cycle is cycle


def test_pieces_of_any_size_find_the_same_cycle() -> None:
    text = _words(50) + PARAGRAPH * 12
    found = [feed(CycleDetector(), text, size)[0] for size in (1, 3, 16, 100, 400)]
    assert [c.period if c else None for c in found] == [len(PARAGRAPH)] * 5


def test_checking_every_n_characters_fires_at_most_n_late() -> None:
    text = PROSE + PARAGRAPH * 20
    _, at_once = feed(CycleDetector(every=1), text, 1)
    _, later = feed(CycleDetector(every=64), text, 1)
    assert at_once <= later < at_once + 64


def test_a_block_longer_than_the_window_allows_is_not_seen() -> None:
    block = _words(300, seed=5) + ". "  # about 1,700 characters
    assert feed(CycleDetector(window=6000), block * 4)[0] is not None
    assert feed(CycleDetector(window=3000), block * 4)[0] is None


def test_nothing_fed_and_empty_pieces_are_nothing() -> None:
    detector = CycleDetector()
    assert detector.feed("") is None and detector.fed == 0
    assert feed(detector, PROSE * 2)[0] is None  # a repetition, but under the span


@pytest.mark.parametrize("kwargs", [{"min_span": 0}, {"repeats": 1}, {"window": 10}, {"every": 0}])
def test_settings_that_cannot_work_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="need"):
        CycleDetector(**kwargs)
