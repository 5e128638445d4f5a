"""The view ``keys()`` gives of groups and attributes."""

from __future__ import annotations

from collections.abc import KeysView

__all__ = ["NamesView"]


class NamesView(KeysView[str]):
    """The names of a group's members or of attributes: live and set-like, as h5py's
    ``keys()``, and shown as the list of names."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {list(self)!r}>"
