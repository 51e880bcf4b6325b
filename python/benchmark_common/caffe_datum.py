"""Caffe's ``Datum`` message, encoded and decoded by hand (shared by every backend).

``protobuf`` is not among the backend's permitted imports, and a Datum is small enough to
read with a varint decoder. The message (caffe.proto)::

    message Datum {
      optional int32 channels = 1;  optional int32 height = 2;  optional int32 width = 3;
      optional bytes data = 4;      optional int32 label = 5;
      repeated float float_data = 6; optional bool encoded = 7 [default = false];
    }

``data`` holds either raw uint8 pixels in CHW order, BGR (what Caffe's convert_imageset
writes), or, with ``encoded`` set, the bytes of a JPEG/PNG file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


class DatumError(ValueError):
    """A record that is not a well-formed Caffe Datum."""


@dataclass
class Datum:
    """The fields of a Caffe Datum."""

    channels: int = 0
    height: int = 0
    width: int = 0
    data: bytes = b""
    label: int = 0
    float_data: list[float] = field(default_factory=list)
    encoded: bool = False


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a base-128 varint at ``pos``; return (value, next position)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise DatumError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DatumError("varint longer than 10 bytes")


def _to_int32(value: int) -> int:
    """Protobuf writes a negative int32 as a 64-bit two's complement varint."""
    value &= 0xFFFFFFFFFFFFFFFF
    if value >= 1 << 63:
        value -= 1 << 64
    return value


def decode_datum(buf: bytes) -> Datum:
    """Parse a serialized Datum; unknown fields are skipped as protobuf does."""
    datum = Datum()
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
            if number == 1:
                datum.channels = _to_int32(value)
            elif number == 2:
                datum.height = _to_int32(value)
            elif number == 3:
                datum.width = _to_int32(value)
            elif number == 5:
                datum.label = _to_int32(value)
            elif number == 7:
                datum.encoded = bool(value)
        elif wire == _LENGTH:
            length, pos = _read_varint(buf, pos)
            if pos + length > len(buf):
                raise DatumError("truncated length-delimited field")
            chunk = buf[pos : pos + length]
            pos += length
            if number == 4:
                datum.data = bytes(chunk)
            elif number == 6:  # packed repeated float
                if length % 4:
                    raise DatumError("packed float_data length is not a multiple of 4")
                datum.float_data.extend(struct.unpack(f"<{length // 4}f", chunk))
        elif wire == _FIXED32:
            if pos + 4 > len(buf):
                raise DatumError("truncated fixed32 field")
            if number == 6:
                datum.float_data.append(struct.unpack_from("<f", buf, pos)[0])
            pos += 4
        elif wire == _FIXED64:
            pos += 8
        else:
            raise DatumError(f"unsupported wire type {wire} (field {number})")
    if pos != len(buf):
        raise DatumError("record ends inside a field")
    return datum


def _write_varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int32 -> 10-byte two's complement, as protobuf
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_datum(datum: Datum) -> bytes:
    """Serialize a Datum the way protobuf does (fields in number order, defaults omitted)."""
    out = bytearray()
    for number, value in ((1, datum.channels), (2, datum.height), (3, datum.width)):
        if value:
            out += _write_varint(number << 3 | _VARINT) + _write_varint(value)
    if datum.data:
        out += _write_varint(4 << 3 | _LENGTH) + _write_varint(len(datum.data)) + datum.data
    if datum.label:
        out += _write_varint(5 << 3 | _VARINT) + _write_varint(datum.label)
    if datum.float_data:
        packed = struct.pack(f"<{len(datum.float_data)}f", *datum.float_data)
        out += _write_varint(6 << 3 | _LENGTH) + _write_varint(len(packed)) + packed
    if datum.encoded:
        out += _write_varint(7 << 3 | _VARINT) + _write_varint(1)
    return bytes(out)
