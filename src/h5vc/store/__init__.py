"""The only layer that writes HDF5: raw_data + hash tables, virtual datasets, chunk maps."""
