"""HDF5's bytes: the floor below the versioned store and the sample stores.

Object headers (:mod:`.header`), virtual-dataset mappings (:mod:`.mappings`),
chunk B-trees (:mod:`.btree`) and the chunk table read from them
(:mod:`.chunktable`), checks for damaged objects (:mod:`.damage`), vectored
reads (:mod:`.scatter`) and the filter pipeline (:mod:`.codecs`).
Nothing here knows of versions, layouts or samples; ``h5vc.store`` and
``h5vc.samples`` both build on it.
"""
