"""The key -> record table's edits and comparisons against plain dicts (pure numpy)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from h5vc.columns.schema import ColumnSchema
from h5vc.columns.table import Table, records_dtype

SCHEMA = ColumnSchema.parse(shape=(2,), dtype="uint8").with_key_type("int")
DTYPE = records_dtype(SCHEMA)

tables = st.dictionaries(st.integers(0, 60), st.integers(0, 5), max_size=40)


def table_of(content: dict[int, int]) -> Table:
    records = np.zeros(len(content), DTYPE)
    records["checksum"] = list(content.values())
    return Table(np.array(list(content), np.int64), records, "int")


def as_dict(table: Table) -> dict[int, int]:
    return dict(zip(table.keys.tolist(), table.records["checksum"].tolist()))


@settings(max_examples=200, deadline=None)
@given(base=tables, changes=tables, data=st.data())
def test_edit_gives_the_edited_dict_and_names_every_row_that_changed(base, changes, data):
    deleted = data.draw(st.sets(st.sampled_from(sorted(base)))) if base else set()
    changes = {k: v for k, v in changes.items() if k not in deleted}
    table = table_of(base)
    edited_keys = [k for k in changes if k in base]
    new_keys = [k for k in changes if k not in base]
    edited = table_of({k: changes[k] for k in edited_keys}).records
    added = table_of({k: changes[k] for k in new_keys}).records
    result, rows, key_rows = table.edit(
        table.lookup(sorted(deleted)), table.lookup(edited_keys), edited, new_keys, added
    )
    expected = {k: v for k, v in base.items() if k not in deleted} | changes
    assert as_dict(result) == expected
    assert len(set(result.keys.tolist())) == len(result)
    # every row that differs from the base at the same position is named
    old_keys, old_records = table.keys, table.records["checksum"]
    for row in range(len(result)):
        key_differs = row >= len(base) or result.keys[row] != old_keys[row]
        record_differs = key_differs or result.records["checksum"][row] != old_records[row]
        assert not key_differs or row in key_rows
        assert not record_differs or row in rows


@settings(max_examples=200, deadline=None)
@given(old=tables, new=tables)
def test_compare_gives_the_added_removed_and_changed_keys(old, new):
    added, removed, changed = table_of(old).compare(table_of(new))
    assert sorted(added.tolist()) == sorted(set(new) - set(old))
    assert sorted(removed.tolist()) == sorted(set(old) - set(new))
    assert sorted(changed.tolist()) == sorted(k for k in set(old) & set(new) if old[k] != new[k])


def test_compare_of_str_keys_in_other_orders() -> None:
    def str_table(content: dict[str, int]) -> Table:
        records = np.zeros(len(content), DTYPE)
        records["checksum"] = list(content.values())
        keys = np.empty(len(content), object)
        keys[:] = list(content)
        return Table(keys, records, "str")

    added, removed, changed = str_table({"a": 1, "b": 2, "é": 3}).compare(
        str_table({"é": 4, "c": 5, "a": 1})
    )
    assert (added.tolist(), removed.tolist(), changed.tolist()) == (["c"], ["b"], ["é"])
