"""WAL positions: PostgreSQL LSNs and the (lsn, ordinal) position of every change."""

from __future__ import annotations

from dataclasses import dataclass

#: Baseline rows sort before every change at the snapshot LSN: their ordinal is
#: this base plus the row index. Far below any real ordinal, far above int64 min.
BASELINE_ORDINAL_BASE = -(2**62)
#: The ordinal of a bare LSN: "everything at this LSN has been applied".
END_OF_LSN = 2**62
_LSN_MASK = 2**64 - 1


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


@dataclass(frozen=True, slots=True)
class Position:
    """Where a change stands in one source's stream; strictly increasing along it.

    Streamed changes: (commit LSN of their transaction, ordinal within it).
    Baseline rows: (snapshot LSN, BASELINE_ORDINAL_BASE + row index).
    `epoch` counts the times the source's WAL started again below positions the stream already held (a
    failover to a lagging standby, a point-in-time restore, a re-created database): it is the most
    significant part, so everything of a new epoch sorts after everything before it. Text: 'E@X/Y:N' for
    epoch E > 0, the plain forms for epoch 0.
    `repair` numbers the changes an instance made to its own copy after the stream change at (lsn, ordinal),
    without a stream change of their own (RestoreSnapshot, StartReplay, a dead-letter replay): the least
    significant part, so repair k sorts after the change it follows and its earlier repairs, and before any
    later stream change (which has repair 0 and a greater (lsn, ordinal)). A client that applied a repair
    resumes after it; one that did not resumes before it and gets it. Text: a '+k' suffix for k > 0.
    """

    lsn: int
    ordinal: int = END_OF_LSN
    epoch: int = 0
    repair: int = 0

    @classmethod
    def parse(cls, text: str) -> Position:
        """Parse 'X/Y', 'X/Y:N' or 'X/Y:bN' (baseline row N), each optionally preceded by 'E@' (epoch E) and
        followed by '+k' (repair k)."""
        epoch_text, at, rest = text.strip().rpartition("@")
        rest, repair = _split_repair(rest, text)
        epoch = 0
        if at:
            if not epoch_text.isdigit():
                raise PositionError(f"invalid position {text!r}: the epoch before '@' must be a decimal number")
            epoch = int(epoch_text)
        lsn_text, sep, ordinal_text = rest.partition(":")
        lsn = parse_lsn(lsn_text)
        if not sep:
            return cls(lsn, epoch=epoch, repair=repair)
        baseline = ordinal_text.startswith("b")
        digits = ordinal_text[1:] if baseline else ordinal_text
        if not digits.isdigit():
            raise PositionError(
                f"invalid position {text!r}: expected 'X/Y', 'X/Y:N' or 'X/Y:bN' with a decimal N"
            )
        ordinal = int(digits)
        return cls(lsn, BASELINE_ORDINAL_BASE + ordinal if baseline else ordinal, epoch, repair)

    @classmethod
    def baseline_row(cls, snapshot_lsn: int, index: int) -> Position:
        return cls(snapshot_lsn, BASELINE_ORDINAL_BASE + index)

    @property
    def key(self) -> tuple[int, int, int]:
        """(LSN with the epoch above its 64 bits, ordinal, repair): a plain tuple that orders as positions do."""
        return (self.epoch << 64 | self.lsn, self.ordinal, self.repair)

    @classmethod
    def from_key(cls, key: tuple[int, int, int]) -> Position:
        wide, ordinal, repair = key
        return cls(wide & _LSN_MASK, ordinal, wide >> 64, repair)

    @property
    def is_baseline(self) -> bool:
        return self.ordinal < 0

    @property
    def stream(self) -> Position:
        """The stream change this position is at or follows: itself without its repair count."""
        return self if not self.repair else Position(self.lsn, self.ordinal, self.epoch)

    def next_repair(self) -> Position:
        """The position of the next repair after this one (or after this stream change)."""
        return Position(self.lsn, self.ordinal, self.epoch, self.repair + 1)

    def __str__(self) -> str:
        epoch = f"{self.epoch}@" if self.epoch else ""
        repair = f"+{self.repair}" if self.repair else ""
        if self.ordinal == END_OF_LSN:
            return f"{epoch}{format_lsn(self.lsn)}{repair}"
        if self.ordinal < 0:
            return f"{epoch}{format_lsn(self.lsn)}:b{self.ordinal - BASELINE_ORDINAL_BASE}{repair}"
        return f"{epoch}{format_lsn(self.lsn)}:{self.ordinal}{repair}"

    # Each comparison written out (functools.total_ordering would derive >, <= and >= from < and ==, two
    # calls each): positions are compared for every change applied.
    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        return (self.epoch, self.lsn, self.ordinal, self.repair) < (other.epoch, other.lsn, other.ordinal,
                                                                     other.repair)

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        return (self.epoch, self.lsn, self.ordinal, self.repair) <= (other.epoch, other.lsn, other.ordinal,
                                                                      other.repair)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        return (self.epoch, self.lsn, self.ordinal, self.repair) > (other.epoch, other.lsn, other.ordinal,
                                                                     other.repair)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        return (self.epoch, self.lsn, self.ordinal, self.repair) >= (other.epoch, other.lsn, other.ordinal,
                                                                      other.repair)


def _split_repair(text: str, whole: str) -> tuple[str, int]:
    """('X/Y:N', k) from 'X/Y:N+k'; a '+' before the LSN's '/' is no repair suffix (and fails as an LSN)."""
    body, plus, digits = text.rpartition("+")
    if not plus or "/" not in body:
        return text, 0
    if not (digits.isascii() and digits.isdigit()) or int(digits) == 0:
        raise PositionError(f"invalid position {whole!r}: the repair count after '+' must be a positive decimal "
                            "number, e.g. '0/16B3748:5+1'")
    return body, int(digits)


ZERO = Position(0, BASELINE_ORDINAL_BASE - 1)
"""Before everything."""
