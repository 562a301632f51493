"""BLIS's kernel set on a CPU it does not know (tinytitan.blis): chosen in forked children, never fatal."""

from __future__ import annotations

import os

import pytest

from tinytitan import blis
from tinytitan.cpu_blas import find_blis

LIB = find_blis()
needs_blis = pytest.mark.skipif(LIB is None, reason="libblis4-pthread is not installed")


def test_a_forked_child_answers_or_is_none_when_it_dies() -> None:
    assert blis._forked(lambda: "7 zen3") == "7 zen3"
    assert blis._forked(lambda: str(os.abort())) is None
    assert blis._forked(lambda: str(1 // 0)) is None


@pytest.mark.parametrize(
    ("vendor", "flags"),
    [("AuthenticAMD", {"avx", "fma"}), ("GenuineIntel", {"avx2"}), ("CentaurHauls", {"avx2", "fma"}), ("", set())],
)
def test_no_choice_without_avx2_and_fma_or_for_another_vendor(
    monkeypatch: pytest.MonkeyPatch, vendor: str, flags: set[str]
) -> None:
    monkeypatch.setattr(blis, "_cpu", lambda: (vendor, flags))
    monkeypatch.setattr(blis, "_forked", lambda fn: pytest.fail("BLIS was asked"))
    assert blis.arch_for("/no/libblis.so.4") is None


@needs_blis
def test_a_kernel_set_the_build_lacks_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """BLIS aborts the process that starts with an id it has no kernels for: that happens in the
    checking child, silently, and the choice is left to BLIS."""
    assert LIB is not None
    assert blis._forked(lambda: blis._start(LIB, "63")) is None
    monkeypatch.setattr(blis, "_cpu", lambda: ("AuthenticAMD", {"avx2", "fma"}))
    monkeypatch.setattr(blis, "_choose", lambda lib, preferred: "63 zen3")
    assert blis.arch_for(LIB) is None


@needs_blis
def test_the_choice_is_an_avx2_set_this_build_starts_with_or_blis_knows_the_cpu() -> None:
    assert LIB is not None
    vendor, flags = blis._cpu()
    found = blis.arch_for(LIB)
    if found is not None:
        arch, name = found
        assert name in blis._PREFERRED[vendor] and blis._forked(lambda: blis._start(LIB, str(arch))) == "ok"
    elif vendor in blis._PREFERRED and {"avx2", "fma"} <= flags:
        assert blis._forked(lambda: blis._choose(LIB, blis._PREFERRED[vendor])) == ""  # not "generic"


def own_choice(lib: str) -> str:
    """The id BLIS picks by itself on this CPU (always one its build has)."""

    def query() -> str:
        import ctypes

        library = ctypes.CDLL(lib)
        library.bli_init()
        return str(library.bli_arch_query_id())

    answer = blis._forked(query)
    assert answer is not None
    return answer


@needs_blis
def test_a_users_own_kernel_id_is_refused_only_when_blis_would_abort(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LIB is not None
    monkeypatch.delenv(blis.KERNELS_ENV, raising=False)
    monkeypatch.delenv(blis.ARCH_ENV, raising=False)
    assert blis.refusal(LIB) is None  # unset: BLIS chooses
    monkeypatch.setenv(blis.ARCH_ENV, own_choice(LIB))
    assert blis.refusal(LIB) is None
    monkeypatch.setenv(blis.ARCH_ENV, "63")
    why = blis.refusal(LIB)
    assert why is not None and why.startswith("BLIS_ARCH_TYPE=63 names no kernel set") and "unset it" in why
    assert blis.refusal("/usr/lib/openblas-pthread/libopenblas.so.0") is None  # not BLIS's variable
