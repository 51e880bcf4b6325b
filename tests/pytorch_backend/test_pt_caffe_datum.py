"""The hand-written Caffe Datum codec speaks protobuf's wire format."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytorch_benchmarks.data.caffe_datum import Datum, DatumError, decode_datum, encode_datum


def test_known_bytes_decode():
    """Bytes as protobuf writes Datum{channels:3 height:2 width:1 data:'abcdef' label:7}."""
    raw = b"\x08\x03\x10\x02\x18\x01\x22\x06abcdef\x28\x07"
    datum = decode_datum(raw)
    assert (datum.channels, datum.height, datum.width, datum.label) == (3, 2, 1, 7)
    assert datum.data == b"abcdef" and datum.encoded is False
    assert encode_datum(datum) == raw


def test_negative_label_is_ten_byte_varint():
    raw = encode_datum(Datum(label=-1))
    assert raw == b"\x28" + b"\xff" * 9 + b"\x01"
    assert decode_datum(raw).label == -1


def test_float_data_packed_and_unpacked_and_unknown_fields():
    unpacked = b"\x35" + struct.pack("<f", 1.5) + b"\x35" + struct.pack("<f", -2.0)
    unknown = b"\x48\x96\x01" + b"\x52\x02hi" + b"\x59" + b"\x00" * 8  # fields 9, 10, 11
    datum = decode_datum(unknown + unpacked + b"\x38\x01")
    assert datum.float_data == [1.5, -2.0] and datum.encoded is True
    packed = encode_datum(Datum(float_data=[0.25, 4.0]))
    assert decode_datum(packed).float_data == [0.25, 4.0]


@pytest.mark.parametrize("raw", [b"\x08", b"\x22\x05abc", b"\x35\x00\x00", b"\x0b"])
def test_malformed_records_raise(raw):
    with pytest.raises(DatumError):
        decode_datum(raw)


@given(
    channels=st.integers(0, 2**31 - 1),
    height=st.integers(0, 2**31 - 1),
    width=st.integers(0, 2**31 - 1),
    data=st.binary(max_size=64),
    label=st.integers(-(2**31), 2**31 - 1),
    encoded=st.booleans(),
)
def test_round_trip(channels, height, width, data, label, encoded):
    datum = Datum(channels, height, width, data, label, [], encoded)
    assert decode_datum(encode_datum(datum)) == datum
