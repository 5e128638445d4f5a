"""Sample columns: keyed samples (images, labels, ...) versioned inside a versioned file.

``g.create_column(name, shape, dtype)`` in a staged version makes one; ``vf[v][name]``
reads it back. See docs/samples.md for the workflow and docs/format.md for the layout.
"""

from h5vc.columns.column import ColumnDataset, CommittedColumn, StagedColumn, column_schema
from h5vc.columns.schema import ATTR_COLUMN, ColumnSchema
from h5vc.columns.storage import SAMPLES_GROUP, SampleSlots

__all__ = [
    "ATTR_COLUMN",
    "SAMPLES_GROUP",
    "ColumnDataset",
    "ColumnSchema",
    "CommittedColumn",
    "SampleSlots",
    "StagedColumn",
    "column_schema",
]
