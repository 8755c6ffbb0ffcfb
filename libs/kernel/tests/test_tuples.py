"""TupleData codec: round trips, and corrupt bytes raise ProtocolError only."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laredo_kernel.errors import ProtocolError
from laredo_kernel.tuples import UNCHANGED, decode_tuple, decode_tuple_exact, encode_tuple

raw_values = st.lists(st.one_of(st.none(), st.just(UNCHANGED), st.binary(max_size=50)), max_size=20)


@given(raw_values)
def test_round_trip(values: list) -> None:
    assert decode_tuple_exact(encode_tuple(values)) == values


def test_known_bytes() -> None:
    encoded = encode_tuple([b"42", None, UNCHANGED])
    assert encoded == b"\x00\x03t\x00\x00\x00\x0242nu"
    values, end = decode_tuple(b"XX" + encoded, 2)
    assert values == [b"42", None, UNCHANGED] and end == len(encoded) + 2


@given(st.binary(max_size=64))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    try:
        decode_tuple_exact(data)
    except ProtocolError:
        pass


@given(raw_values, st.data())
def test_mutated_tuples_raise_only_protocol_errors(values: list, data: st.DataObject) -> None:
    encoded = bytearray(encode_tuple(values))
    if encoded:
        index = data.draw(st.integers(0, len(encoded) - 1))
        encoded[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(encoded)))
    try:
        decode_tuple_exact(bytes(encoded[:cut]))
    except ProtocolError:
        pass


@pytest.mark.parametrize(("data", "message"), [
    (b"", "no column count"), (b"\xff\xff", "negative column count"), (b"\x00\x01", "missing"),
    (b"\x00\x01x", "unknown column kind"), (b"\x00\x01t\x00\x00\x00\x09ab", "claims 9 bytes"),
    (b"\x00\x00z", "trailing"),
])
def test_corruption_is_named(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_tuple_exact(data)
