"""check_ref_format accepts exactly the names git's rules allow, whatever path it takes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5vc.errors import InvalidRefNameError
from h5vc.versions.refs import check_ref_format


def _valid(name: str) -> bool:
    """git's rules (``git check-ref-format --allow-onelevel``) and h5vc's own, one by one."""
    if not name or name.startswith(("-", "__")) or name == "@" or name.endswith("."):
        return False
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c in " ~^:?*[\\" for c in name):
        return False
    if ".." in name or "@{" in name:
        return False
    return all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/")
    )


def _accepted(name: str) -> bool:
    try:
        assert check_ref_format("branch", name) == name
    except InvalidRefNameError:
        return False
    return True


_ALPHABET = st.sampled_from(list("ab-_./@{}.lock~^:?*[\\ \t\n\x7f\x00é"))


@settings(max_examples=3000, deadline=None)
@given(st.text(_ALPHABET, max_size=12))
def test_accepts_exactly_the_valid_names(name):
    assert _accepted(name) == _valid(name)


@pytest.mark.parametrize(
    "name",
    ["main", "feature/x", "a.b", "v1.0-rc", "x.locked", "a@b", "a{b}", "é/ü", "a_b", "a/_b"],
)
def test_ordinary_names(name):
    assert _accepted(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "-a",
        "__a",
        "@",
        "a.",
        "a..b",
        "a@{b",
        "/a",
        "a/",
        "a//b",
        ".a",
        "a/.b",
        "a.lock",
        "a.lock/b",
        "a b",
        "a\n",
        "a\x7f",
        "a~",
        "a^",
        "a:",
        "a?",
        "a*",
        "a[",
        "a\\",
    ],
)
def test_refused_names(name):
    assert not _accepted(name)
