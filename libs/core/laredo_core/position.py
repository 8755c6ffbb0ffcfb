"""WAL positions: PostgreSQL LSNs and the (lsn, ordinal) position of every change."""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering

#: Baseline rows sort before every change at the snapshot LSN: their ordinal is
#: this base plus the row index. Far below any real ordinal, far above int64 min.
BASELINE_ORDINAL_BASE = -(2**62)
#: The ordinal of a bare LSN: "everything at this LSN has been applied".
END_OF_LSN = 2**62


class PositionError(ValueError):
    """A text position or LSN could not be parsed."""


def parse_lsn(text: str) -> int:
    """Parse 'X/Y' (hex halves, any case) into a 64-bit LSN."""
    hi, sep, lo = text.strip().partition("/")
    if not sep or not hi or not lo or len(hi) > 8 or len(lo) > 8:
        raise PositionError(f"invalid LSN {text!r}: expected 'X/Y' with hexadecimal halves, e.g. '0/16B3748'")
    try:
        return (int(hi, 16) << 32) | int(lo, 16)
    except ValueError:
        raise PositionError(f"invalid LSN {text!r}: halves must be hexadecimal, e.g. '0/16B3748'") from None


def format_lsn(lsn: int) -> str:
    """Format a 64-bit LSN as PostgreSQL does: upper hex, low word zero-padded to 8."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:08X}"


@total_ordering
@dataclass(frozen=True, slots=True)
class Position:
    """Where a change stands in one source's stream; strictly increasing along it.

    Streamed changes: (commit LSN of their transaction, ordinal within it).
    Baseline rows: (snapshot LSN, BASELINE_ORDINAL_BASE + row index).
    """

    lsn: int
    ordinal: int = END_OF_LSN

    @classmethod
    def parse(cls, text: str) -> Position:
        """Parse 'X/Y', 'X/Y:N' or 'X/Y:bN' (baseline row N)."""
        lsn_text, sep, ordinal_text = text.strip().partition(":")
        lsn = parse_lsn(lsn_text)
        if not sep:
            return cls(lsn)
        baseline = ordinal_text.startswith("b")
        digits = ordinal_text[1:] if baseline else ordinal_text
        if not digits.isdigit():
            raise PositionError(
                f"invalid position {text!r}: expected 'X/Y', 'X/Y:N' or 'X/Y:bN' with a decimal N"
            )
        ordinal = int(digits)
        return cls(lsn, BASELINE_ORDINAL_BASE + ordinal if baseline else ordinal)

    @classmethod
    def baseline_row(cls, snapshot_lsn: int, index: int) -> Position:
        return cls(snapshot_lsn, BASELINE_ORDINAL_BASE + index)

    @property
    def is_baseline(self) -> bool:
        return self.ordinal < 0

    def __str__(self) -> str:
        if self.ordinal == END_OF_LSN:
            return format_lsn(self.lsn)
        if self.ordinal < 0:
            return f"{format_lsn(self.lsn)}:b{self.ordinal - BASELINE_ORDINAL_BASE}"
        return f"{format_lsn(self.lsn)}:{self.ordinal}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        return (self.lsn, self.ordinal) < (other.lsn, other.ordinal)


ZERO = Position(0, BASELINE_ORDINAL_BASE - 1)
"""Before everything."""
