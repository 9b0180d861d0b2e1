"""Case files and links, and a record's steps as a file writes them: JSON text in and out, numbers written as short
as they round-trip."""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from collections.abc import Callable

import torch

from .case import Case, CaseError, case_to_dict, parse_case
from .i18n import msg
from .numbers import short_float32
from .record import Record, Step

MAX_LINK_CHARS = 16_000  # a link's case token; browsers and servers take URLs of 32 KB and more
MAX_LINK_JSON = 4_000_000  # bytes of JSON a token may unpack to: the largest valid case, not a zip bomb


def load_case(text: str | bytes) -> Case:
    """A case from the text of a case file; bad JSON is a CaseError naming the line and column."""
    try:
        obj = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError:
        raise CaseError(msg("where.case_file"), msg("error.not_utf8")) from None
    except json.JSONDecodeError as e:
        where, problem = msg("where.case_file"), msg("error.bad_json", line=e.lineno, column=e.colno, detail=e.msg)
        raise CaseError(where, problem) from None
    except RecursionError:
        raise CaseError(msg("where.case_file"), msg("error.too_deep")) from None
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        raise CaseError(msg("where.case_file"), msg("error.not_a_case", detail=str(e)[:80])) from None
    return parse_case(obj)


def dump_case(case: Case) -> str:
    """The case file's text: one key, or one matrix row, per line."""
    return _pretty(case_to_dict(case))


def case_to_link(case: Case, limit: int | None = None) -> str | None:
    """The case file, compact: JSON, deflated, base64url without padding (for the `case` URL parameter); None when
    it would be longer than `limit` characters, found without deflating all of a big case (0.2 s at n = 1024)."""
    text = json.dumps(case_to_dict(case), separators=(",", ":"), ensure_ascii=False).encode()
    deflate, parts, chunk = zlib.compressobj(9), [], 1 << 16
    for start in range(0, len(text), chunk):
        parts.append(deflate.compress(text[start : start + chunk]))
        if limit is not None and sum(map(len, parts)) * 4 / 3 > limit:  # base64 makes 4 characters of 3 bytes
            return None
    token = base64.urlsafe_b64encode(b"".join(parts) + deflate.flush()).decode().rstrip("=")
    return None if limit is not None and len(token) > limit else token


def case_from_link(token: str) -> Case:
    """The case in a link token; a malformed, oversized or invalid one is a CaseError that says which."""
    if len(token) > MAX_LINK_CHARS:
        raise CaseError(msg("where.link"), msg("error.link_long", count=len(token), limit=MAX_LINK_CHARS))
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        inflater = zlib.decompressobj()
        text = inflater.decompress(packed, MAX_LINK_JSON)
        if inflater.unconsumed_tail:
            raise CaseError(msg("where.link"), msg("error.link_big"))
        if not inflater.eof:
            raise CaseError(msg("where.link"), msg("error.link_short"))
    except (binascii.Error, ValueError, zlib.error):
        raise CaseError(msg("where.link"), msg("error.link_decode")) from None
    return load_case(text)


def record_to_dict(record: Record, code: Callable[[Step], str] = lambda step: "") -> list[dict]:
    """A record's steps as a file writes them: each with its formula, its `code`, its notes and its tensors (a masked
    score, -inf, as null: JSON has no infinity)."""
    return [
        {
            "number": step.number,
            "name": step.name,
            "title": step.title,
            "explanation": step.explanation,
            "formula": step.formula,
            "code": code(step),
            "device": step.device,
            "seconds": step.seconds,
            "notes": list(step.notes),
            "tensors": {name: tensor_to_dict(tensor, step.device) for name, tensor in step.tensors.items()},
        }
        for step in record.steps
    ]


def dumps(content: dict) -> str:
    """A file's content as one line of JSON text (no NaN: a file a program reads back)."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False)


def tensor_to_dict(tensor, device: str) -> dict:
    """A tensor's shape, dtype, device and numbers; one not held (step 6's Broadcast, for big n) has data null."""
    data = to_lists(tensor.contiguous()) if isinstance(tensor, torch.Tensor) else None
    dtype = str(tensor.dtype).removeprefix("torch.")
    return {"shape": list(tensor.shape), "dtype": dtype, "device": device, "data": data}


def to_lists(tensor: torch.Tensor):
    """Nested lists of the shortest decimals that read back to the same float32 (or float64) values."""
    short = short_float32 if tensor.dtype == torch.float32 else float
    return _map(tensor.tolist(), lambda v: None if math.isinf(v) else short(v))


def _pretty(value, indent: str = "") -> str:
    if isinstance(value, dict) and value:
        inner = indent + "  "
        items = ",\n".join(f"{inner}{json.dumps(k)}: {_pretty(v, inner)}" for k, v in value.items())
        return "{\n" + items + "\n" + indent + "}"
    if isinstance(value, list) and value and isinstance(value[0], list):
        rows = ",\n".join(indent + "  " + json.dumps(row, ensure_ascii=False) for row in value)
        return "[\n" + rows + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _map(value, f):
    return [_map(v, f) for v in value] if isinstance(value, list) else f(value)
