"""circom inputs as snarkjs reads them: the JSON object of an input file, each signal's values
flattened and read as JavaScript's ``BigInt`` would, and the hash circom_runtime finds a signal
by. Shared by every witness generator (:mod:`~distprove.witness.wasm`,
:mod:`~distprove.witness.native`), so an input reads, and fails, the same way whatever computes it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any

from distprove.errors import FormatError

_JS_SPACE = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*"
_JS_BIGINT = re.compile(
    rf"{_JS_SPACE}(?:([+-]?[0-9]+)|0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)){_JS_SPACE}\Z"
)
"""What JavaScript's ``BigInt(string)`` accepts (besides the empty string): decimal with a sign,
or unsigned hex/octal/binary, with JavaScript's whitespace around."""
_JS_SAFE = 2**53


def fnv1a64(name: str) -> int:
    """The FNV-1a 64-bit hash of a signal name, over its UTF-16 code units as circom_runtime hashes it."""
    h = 0xCBF29CE484222325
    units = name.encode("utf-16-le")
    for k in range(0, len(units), 2):
        h ^= units[k] | (units[k + 1] << 8)
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _describe(value: Any) -> str:
    """A value for an error message, cut short."""
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _to_int(value: Any) -> int | str:
    """The integer snarkjs reads from one JSON value, or the reason it is not one."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if abs(value) > _JS_SAFE:
            return "is a JSON number beyond 2^53, which JavaScript rounds; write it as a string"
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return "is not an integer"
        if abs(value) > _JS_SAFE:
            return "is a JSON number beyond 2^53, which JavaScript rounds; write it as a string"
        return int(value)
    if isinstance(value, str):
        m = _JS_BIGINT.match(value)
        if m is None:
            return "is not an integer (decimal, or 0x/0o/0b)"
        dec, hexa, octa, bina = m.groups()
        if dec is not None:
            return int(dec, 10)
        return int(hexa, 16) if hexa is not None else int(octa, 8) if octa is not None else int(bina, 2)
    return "is not a field element (a number or a string)"


def _flatten(value: Any, out: list[Any], where: list[str], at: str = "") -> None:
    """Nested lists in order, as circom_runtime's flatArray: the values into ``out``, their
    positions (``[1][0]``) into ``where``."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(v, out, where, f"{at}[{i}]")
    else:
        out.append(value)
        where.append(at)


def read_input(input_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object of an input file (signal name -> value or nested list of values).

    Raises FormatError(input_path, problem) for unreadable or invalid JSON, or a top level that is
    not an object.
    """
    path = os.fspath(input_path)
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except OSError as exc:
        raise FormatError(path, f"cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(path, f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise FormatError(path, f"expected a JSON object of input signals, found {type(data).__name__}")
    return data


def field_values(inputs: Mapping[str, Any], source: str, prime: int) -> dict[str, list[int]]:
    """Each input signal's values, flattened in order as circom_runtime's flatArray and reduced
    modulo ``prime``, read as snarkjs reads them. Raises FormatError(source, ...) naming the first
    value that is not an integer and where it stands (``input a[1][0]: ...``)."""
    out: dict[str, list[int]] = {}
    for name, value in inputs.items():
        flat: list[Any] = []
        where: list[str] = []
        _flatten(value, flat, where)
        out[name] = []
        for v, at in zip(flat, where):
            x = _to_int(v)
            if isinstance(x, str):
                raise FormatError(source, f"input {name}{at}: {_describe(v)} {x}")
            out[name].append(x % prime)
    return out
