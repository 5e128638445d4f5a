"""The ``log --graph`` drawing: one column per line of history, newest version first."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

__all__ = ["graph_rows"]


def _draw(columns: Sequence[str | None], mark: int = -1) -> str:
    cells = [
        "*" if i == mark else "|" if name is not None else " " for i, name in enumerate(columns)
    ]
    return " ".join(cells).rstrip()


def _place(columns: list[str | None], name: str) -> int:
    """Put ``name`` in the first free column and return its index."""
    if None in columns:
        slot = columns.index(None)
        columns[slot] = name
        return slot
    columns.append(name)
    return len(columns) - 1


def graph_rows(
    order: Sequence[str], parents: Callable[[str], Sequence[str]]
) -> Iterator[tuple[str, str, str]]:
    """For each version of ``order`` (children before parents): its row prefix, the
    prefix of the lines that follow it, and a connector line to print after it ("" for
    none): ``|/`` where two lines of history join, ``|\\`` where a merge opens one.

    ``parents(name)`` lists the parents of ``name`` that are drawn, first parent first.
    """
    columns: list[str | None] = []
    for name in order:
        col = columns.index(name) if name in columns else _place(columns, name)
        row = _draw(columns, col)
        joins: list[int] = []
        opens: list[int] = []
        listed: list[str | None] = [*parents(name)] or [None]
        first, *more = listed
        if first is None:
            columns[col] = None
        elif first in columns:  # the line ends in a column further along: keep the left one
            k = columns.index(first)
            columns[min(k, col)], columns[max(k, col)] = first, None
            joins.append(max(k, col))
        else:
            columns[col] = first
        for extra in more:
            if extra is not None and extra not in columns:
                opens.append(_place(columns, extra))
        while columns and columns[-1] is None:
            columns.pop()
        connector = ""
        if joins or opens:
            width = max(len(columns), *(i + 1 for i in joins + opens))
            cells = [" "] * (2 * width)
            for i, waiting in enumerate(columns):
                if waiting is not None and i not in opens:
                    cells[2 * i] = "|"
            for i in joins:
                cells[2 * i - 1] = "/"
            for i in opens:
                cells[2 * i - 1] = "\\"
            connector = "".join(cells).rstrip()
        during = [
            "|"
            if i in joins or (i < len(columns) and columns[i] is not None and i not in opens)
            else " "
            for i in range(max(len(columns), *(i + 1 for i in joins), 0))
        ]
        yield row, " ".join(during).rstrip(), connector
