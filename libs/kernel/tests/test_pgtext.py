"""Text-form values to typed values, and typed values to what clients see."""

import datetime as dt
from decimal import Decimal

import pytest

from laredo_kernel.errors import ProtocolError
from laredo_kernel.jsonvalue import to_json_value
from laredo_kernel.pgtext import bytes_converter_for, convert_text, converter_for

UTC = dt.timezone.utc


@pytest.mark.parametrize(("oid", "text", "value"), [
    (16, "t", True), (16, "f", False), (21, "-7", -7), (23, "2147483647", 2147483647),
    (20, "9223372036854775807", 9223372036854775807), (700, "1.5", 1.5), (701, "-Infinity", float("-inf")),
    (1700, "12345678901234567890.000000001", Decimal("12345678901234567890.000000001")),
    (1700, "0.0000001", Decimal("0.0000001")),
    (25, "héllo", "héllo"), (1043, "v", "v"), (1042, "c  ", "c  "), (17, "\\x00ff", b"\x00\xff"),
    (114, '{"a": [1, 2.5, null]}', {"a": [1, 2.5, None]}), (3802, '{"b": true}', {"b": True}),
    (2950, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    (1082, "2026-11-22", dt.date(2026, 11, 22)), (1082, "infinity", "infinity"),
    (1083, "13:45:01.5", dt.time(13, 45, 1, 500000)),
    (1266, "13:45:01+05:30", dt.time(13, 45, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))),
    (1114, "2026-11-22 13:45:01.123456", dt.datetime(2026, 11, 22, 13, 45, 1, 123456)),
    (1184, "2026-11-22 13:45:01+00", dt.datetime(2026, 11, 22, 13, 45, 1, tzinfo=UTC)),
    (1184, "2026-11-22 13:45:01.5-08", dt.datetime(2026, 11, 22, 13, 45, 1, 500000,
                                                   tzinfo=dt.timezone(dt.timedelta(hours=-8)))),
    (1184, "2026-11-22 13:45:01+05:30:15", dt.datetime(2026, 11, 22, 13, 45, 1, tzinfo=dt.timezone(
        dt.timedelta(hours=5, minutes=30, seconds=15)))),
    (1266, "13:45:01-08", dt.time(13, 45, 1, tzinfo=dt.timezone(dt.timedelta(hours=-8)))),
    (1186, "P1Y2M3DT4H5M6S", "P1Y2M3DT4H5M6S"),
    (1007, "{1,NULL,3}", [1, None, 3]), (1009, '{"a b","c\\"d",NULL,"NULL"}', ["a b", 'c"d', None, "NULL"]),
    (1007, "{{1,2},{3,4}}", [[1, 2], [3, 4]]), (1007, "{}", []), (1007, "[0:1]={5,6}", [5, 6]),
])
def test_builtin_types(oid: int, text: str, value: object) -> None:
    assert convert_text(converter_for(oid), text.encode(), "c") == value


def test_enum_domain_and_custom_array_use_their_base_type() -> None:
    assert converter_for(99999, "mood", 25)("happy") == "happy"
    assert converter_for(99998, "positive_int", 23)("5") == 5
    assert converter_for(99997, "_mood", 25)("{sad,happy}") == ["sad", "happy"]
    assert converter_for(99996, "geometry")("POINT(1 2)") == "POINT(1 2)"


def test_bad_values_raise_protocol_error_naming_the_column() -> None:
    with pytest.raises(ProtocolError, match="column 'qty'"):
        convert_text(converter_for(23), b"12x", "qty")
    with pytest.raises(ProtocolError, match="column 'n'"):
        convert_text(converter_for(1700), b"abc", "n")
    with pytest.raises(ProtocolError):
        convert_text(converter_for(1007), b"{1,2", "a")


@pytest.mark.parametrize(("value", "json"), [
    (2**53, 2**53), (2**53 + 1, str(2**53 + 1)), (Decimal("1.10"), "1.10"), (float("nan"), "NaN"),
    (b"\x00\xff", "AP8="), (dt.date(2026, 1, 2), "2026-01-02"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "2026-01-02T03:04:05+00:00"), ([1, Decimal("2")], [1, "2"]),
    ({"k": b"\x01"}, {"k": "AQ=="}), (None, None), (True, True),
])
def test_json_mapping(value: object, json: object) -> None:
    assert to_json_value(value) == json


#: numeric text as PostgreSQL writes it (never an exponent; its scale's trailing zeros kept).
NUMERIC_TEXTS = ["0.0000001", "0." + "0" * 19 + "1", "-0.000001", "123456789012345678901234567890.123456789",
                 "0.00", "0", "1.50", "100000", "1" * 131072, "0." + "0" * 16382 + "1", "NaN", "Infinity",
                 "-Infinity", "-12345678901234567890"]


@pytest.mark.parametrize("text", NUMERIC_TEXTS, ids=lambda t: t if len(t) < 40 else f"{t[:10]}...({len(t)})")
def test_numeric_keeps_postgresql_text_form_for_clients(text: str) -> None:
    """To what clients see (JSON, Struct), straight from the text and through the typed Decimal, it stays."""
    assert bytes_converter_for(1700, "numeric", json_values=True)(text.encode()) == text
    assert to_json_value(convert_text(converter_for(1700), text.encode(), "n")) == text
    assert to_json_value([convert_text(converter_for(1700), text.encode(), "n")]) == [text]  # numeric[]


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("1E-7"), "0.0000001"), (Decimal("1E+3"), "1000"), (Decimal("-0E-2"), "-0.00"),
    (Decimal("sNaN"), "sNaN"), (Decimal("1.000E-10"), "0.0000000001000"),
])
def test_decimals_from_elsewhere_are_written_without_an_exponent(value: Decimal, text: str) -> None:
    assert to_json_value(value) == text


@pytest.mark.parametrize(("oid", "name", "text"), [
    (790, "money", "$1,234.56"), (1186, "interval", "P1Y2M3DT4H5M6S"), (1186, "interval", "PT0.000001S"),
    (20, "int8", "9007199254740993"), (20, "int8", "-9223372036854775808"),
])
def test_other_exact_types_keep_their_text_for_clients(oid: int, name: str, text: str) -> None:
    assert bytes_converter_for(oid, name, json_values=True)(text.encode()) == text
    assert to_json_value(convert_text(converter_for(oid, name), text.encode(), "c")) == text


@pytest.mark.parametrize(("oid", "name", "text"), [
    (1184, "timestamptz", "2026-01-02 03:04:05.123+00"), (1184, "timestamptz", "2026-01-02 03:04:05+05:30"),
    (1184, "timestamptz", "1999-12-31 23:59:59.999999-08"), (1184, "timestamptz", "infinity"),
    (1184, "timestamptz", "0044-03-15 12:00:00+00 BC"), (1114, "timestamp", "2026-01-02 03:04:05.5"),
    (1114, "timestamp", "-infinity"), (1082, "date", "2026-02-28"), (1082, "date", "infinity"),
    (1082, "date", "10000-01-01"), (1083, "time", "23:59:59.000001"), (1266, "timetz", "12:00:00+05"),
    (1266, "timetz", "12:00:00.25-03:30"),
])
def test_dates_and_times_reach_clients_as_their_typed_value_would(oid: int, name: str, text: str) -> None:
    """The JSON fast path gives what the typed value gives through to_json_value."""
    assert bytes_converter_for(oid, name, json_values=True)(text.encode()) == to_json_value(
        convert_text(converter_for(oid, name), text.encode(), "c"))
