"""What commands print: aligned tables and `key: value` blocks for people, JSON documents or lines for scripts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from laredo_cli.protojson import number

#: Cells of row tables are cut to this many characters unless --wide is given.
MAX_CELL = 60
ELLIPSIS = "..."
NONE_SHOWN = "(none)"


def format_value(value: Any) -> str:
    """A JSON value as one table cell: null, true/false, whole numbers without `.0`, documents as compact JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        value = number(value)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return one_line(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def one_line(text: str) -> str:
    """Line breaks and tabs made visible, so every record stays on one line."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def shorten(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:max(limit - len(ELLIPSIS), 1)] + ELLIPSIS


def render_table(headers: Sequence[str], rows: Iterable[Sequence[str]], *,
                 right: Iterable[int] = ()) -> list[str]:
    """Left-aligned columns (right-aligned for the indexes in `right`), two spaces apart, no trailing blanks."""
    body = [list(map(str, row)) for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        if len(row) != len(headers):
            raise ValueError(f"a table row has {len(row)} cells for {len(headers)} headers: {row!r}")
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    right_aligned = set(right)

    def line(cells: Sequence[str]) -> str:
        parts = [cell.rjust(w) if i in right_aligned else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(parts).rstrip()

    return [line(headers), *(line(row) for row in body)]


def render_fields(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """`name:  value` lines with the values aligned."""
    width = max((len(name) for name, _ in pairs), default=0) + 1
    return [f"{name + ':':<{width}}  {value}".rstrip() for name, value in pairs]


def render_rows(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
                wide: bool = False) -> list[str]:
    """Rows (JSON objects) as a table of the chosen columns in that order, else of every key seen, sorted (Struct
    rows carry no column order: sorting keeps the output the same from one run to the next); a column a row lacks
    shows empty."""
    names = list(columns) if columns else sorted({key for row in rows for key in row})
    limit = None if wide else MAX_CELL
    cells = [[shorten(format_value(row[name]), limit) if name in row else "" for name in names] for row in rows]
    right = [i for i, name in enumerate(names)
             if rows and all(isinstance(r.get(name), int | float) and not isinstance(r.get(name), bool)
                             for r in rows if name in r)]
    return render_table(names, cells, right=right)


@dataclass
class Output:
    """The streams a command writes to and whether it writes JSON (`--json`) or text for people."""

    out: TextIO
    err: TextIO
    json_mode: bool = False

    def line(self, text: str = "") -> None:
        print(text, file=self.out)

    def lines(self, lines: Iterable[str]) -> None:
        for text in lines:
            self.line(text)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Iterable[int] = (),
              empty: str = NONE_SHOWN) -> None:
        self.lines(render_table(headers, rows, right=right))
        if not rows:
            self.line(empty)

    def fields(self, pairs: Sequence[tuple[str, str]]) -> None:
        self.lines(render_fields(pairs))

    def json(self, document: Any) -> None:
        """One JSON document, indented (for `--json` of one-shot commands)."""
        print(json.dumps(document, indent=2, ensure_ascii=False), file=self.out)

    def json_line(self, document: Any) -> None:
        """One compact JSON document per line, flushed at once (for streams: watch, subscribe)."""
        print(json.dumps(document, separators=(",", ":"), ensure_ascii=False), file=self.out, flush=True)

    def stream_line(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A remark for people on stderr, so stdout stays parseable."""
        print(text, file=self.err, flush=True)
