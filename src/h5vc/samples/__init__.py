"""Content-addressed sample stores for machine-learning datasets.

Two HDF5 backends, identified by their format code:

``"00"``
    Samples of any shape up to the schema's maximum, chunked within the sample.
``"01"``
    Samples of one fixed shape, each stored as a single chunk and verified by xxhash64.

Example::

    store = SampleStore("images", backend="01", shape=(224, 224), dtype="uint8")
    with store.writer() as writer:
        record = writer.write(image)
    with store.reader() as reader:
        image = reader.read(record)
        images = reader.read_many([record, record])  # a batch, decoded on a few threads
"""

from h5vc.samples.options import COMPLIBS, Compression, default_compression, parse_compression
from h5vc.samples.records import Record00, Record01, SampleRecord, decode_record, encode_record
from h5vc.samples.schema import (
    BACKENDS,
    DEFAULT_COLLECTION_COUNT,
    DEFAULT_COLLECTION_SIZE,
    Schema,
)
from h5vc.samples.store import SampleReader, SampleStore, SampleWriter, content_digest

__all__ = [
    "BACKENDS",
    "COMPLIBS",
    "DEFAULT_COLLECTION_COUNT",
    "DEFAULT_COLLECTION_SIZE",
    "Compression",
    "Record00",
    "Record01",
    "SampleReader",
    "SampleRecord",
    "SampleStore",
    "SampleWriter",
    "Schema",
    "content_digest",
    "decode_record",
    "default_compression",
    "encode_record",
    "parse_compression",
]
