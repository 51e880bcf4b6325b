"""Caffe's ``Datum`` message: one implementation, shared by the backends (``benchmark_common``)."""

from benchmark_common.caffe_datum import Datum, DatumError, decode_datum, encode_datum

__all__ = ["Datum", "DatumError", "decode_datum", "encode_datum"]
