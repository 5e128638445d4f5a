"""Sample columns: keyed samples (images, labels, ...) versioned inside a versioned file.

``g.create_column(name, shape, dtype)`` in a staged version makes one; ``vf[v][name]``
reads it back. See docs/samples.md for the workflow and docs/format.md for the layout.

The names below are loaded on first use: a module that needs one of the package's
modules (the table's names, say) does not load the sample stores with it.
"""

from h5vc.lazy import lazy_names

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

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "ATTR_COLUMN": "h5vc.columns.schema",
        "ColumnDataset": "h5vc.columns.column",
        "ColumnSchema": "h5vc.columns.schema",
        "CommittedColumn": "h5vc.columns.column",
        "SAMPLES_GROUP": "h5vc.columns.storage",
        "SampleSlots": "h5vc.columns.storage",
        "StagedColumn": "h5vc.columns.column",
        "column_schema": "h5vc.columns.column",
    },
)
