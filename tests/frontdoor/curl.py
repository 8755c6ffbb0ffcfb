"""The curl binary as a client of a front door: run without blocking the event loop that serves the app, and
gRPC-Web text bodies (base64 of length-prefixed frames), which no Python client library speaks."""

from __future__ import annotations

import asyncio
import base64
import re
import struct

from google.protobuf.message import Message

TRAILERS = 0x80


async def run_curl(*args: str, stdin: bytes = b"", max_time: float = 10.0) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, stderr) of `curl --silent --show-error ARGS`, `stdin` on its standard input."""
    process = await asyncio.create_subprocess_exec("curl", "--silent", "--show-error", "--max-time", f"{max_time:g}",
                                                   *args, stdin=asyncio.subprocess.PIPE,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate(stdin)
    return process.returncode or 0, out, err


def grpc_web_text_body(message: Message) -> str:
    """One uncompressed message frame, base64-encoded."""
    data = message.SerializeToString()
    return base64.b64encode(struct.pack(">BI", 0, len(data)) + data).decode()


def grpc_web_text_frames(body: bytes) -> list[tuple[int, bytes]]:
    """(flags, payload) of each frame of a gRPC-Web text response. The server may base64-encode each frame on
    its own (padding in the middle), so the body is decoded chunk by chunk; a trailers frame has flag 0x80."""
    data = b"".join(base64.b64decode(chunk) for chunk in re.findall(rb"[A-Za-z0-9+/]+=*", body))
    frames, offset = [], 0
    while offset < len(data):
        flags, length = data[offset], int.from_bytes(data[offset + 1:offset + 5], "big")
        frames.append((flags, data[offset + 5:offset + 5 + length]))
        offset += 5 + length
    return frames


def trailers(frames: list[tuple[int, bytes]]) -> dict[str, str]:
    """The trailers frame's fields (grpc-status, grpc-message)."""
    return {key: value for flags, payload in frames if flags & TRAILERS
            for key, value in header_fields(payload).items()}


def header_fields(block: bytes) -> dict[str, str]:
    """`name: value` lines (HTTP headers, or a trailers frame) with lower-case names; other lines ignored."""
    fields: dict[str, str] = {}
    for line in block.decode(errors="replace").split("\r\n"):
        key, colon, value = line.partition(":")
        if colon and " " not in key.strip():
            fields[key.strip().lower()] = value.strip()
    return fields
