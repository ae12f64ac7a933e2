"""snarkjs JSON files: proof.json, public.json, verification_key.json (SNARKJS_FORMATS.md §8).

Writers produce snarkjs's layout (decimal strings, affine points with a trailing z).
Readers validate and return Python-int points as used by :mod:`distprove.bn254`
(G1 ``(x, y)``, G2 ``((x0, x1), (y0, y1))``, infinity ``None``).

Point z handling (the same as snarkjs's ``fromObject``): z = 1 is affine, z = 0 is the
point at infinity (snarkjs writes ``["0", "1", "0"]``), any other z is a Jacobian point and
is converted to affine as x/z^2, y/z^3. Every coordinate must be a canonical decimal < q,
and the resulting point must be on its curve (no subgroup check, like snarkjs).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Sequence

from distprove import bn254
from distprove.bn254 import G1, G2, Q, R, Affine, Group
from distprove.errors import FormatError

from .atomic import write_atomic

Source = str | os.PathLike[str] | dict[str, Any] | list[Any]

_DECIMAL = re.compile(r"[0-9]+\Z")


@dataclass(frozen=True)
class VerificationKey:
    """The fields of a Groth16 verification_key.json the verifier needs (affine Python-int points)."""

    n_public: int
    alpha1: Affine
    beta2: Affine
    gamma2: Affine
    delta2: Affine
    ic: list[Affine]


# --- writers -------------------------------------------------------------------------


def _g1_json(p: Affine) -> list[str]:
    if p is None:
        return ["0", "1", "0"]
    return [str(p[0]), str(p[1]), "1"]


def _g2_json(p: Affine) -> list[list[str]]:
    if p is None:
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    (x0, x1), (y0, y1) = p
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def proof_to_json(pi_a: Affine, pi_b: Affine, pi_c: Affine) -> dict[str, Any]:
    """proof.json content in snarkjs's layout for affine points (G1, G2, G1)."""
    return {
        "pi_a": _g1_json(pi_a),
        "pi_b": _g2_json(pi_b),
        "pi_c": _g1_json(pi_c),
        "protocol": "groth16",
        "curve": "bn128",
    }


def public_to_json(values: Sequence[int]) -> list[str]:
    """public.json content: the public signals as decimal strings (each must be in [0, r))."""
    out = []
    for v in values:
        v = int(v)
        if not 0 <= v < R:
            raise ValueError(f"public value {v} is not in [0, r)")
        out.append(str(v))
    return out


_PROOF_TEXT = (
    '{{\n "pi_a": [\n  "{}",\n  "{}",\n  "{}"\n ],\n "pi_b": [\n  [\n   "{}",\n   "{}"\n  ],\n  [\n   "{}",\n   "{}"\n  ],\n'
    '  [\n   "{}",\n   "{}"\n  ]\n ],\n "pi_c": [\n  "{}",\n  "{}",\n  "{}"\n ],\n "protocol": "groth16",\n "curve": "bn128"\n}}'
)


def proof_json_bytes(pi_a: Affine, pi_b: Affine, pi_c: Affine) -> bytes:
    """The bytes :func:`write_json_atomic` writes for :func:`proof_to_json`, from one template
    (every value is a decimal string: nothing to escape) instead of the encoder's walk."""
    b = _g2_json(pi_b)
    return _PROOF_TEXT.format(*_g1_json(pi_a), *b[0], *b[1], *b[2], *_g1_json(pi_c)).encode()


def public_json_bytes(values: Sequence[int]) -> bytes:
    """The bytes :func:`write_json_atomic` writes for :func:`public_to_json` (the same checks)."""
    text = public_to_json(values)
    return ("[\n \"" + '",\n "'.join(text) + '"\n]').encode() if text else b"[]"


def json_bytes(obj: Any) -> bytes:
    """``obj`` as JSON text the way snarkjs writes it (1-space indent)."""
    return json.dumps(obj, indent=1).encode()


def vk_to_json(
    n_public: int,
    alpha1: Affine,
    beta2: Affine,
    gamma2: Affine,
    delta2: Affine,
    ic: Sequence[Affine],
    alphabeta_12: list[Any],
) -> dict[str, Any]:
    """verification_key.json content as ``snarkjs zkey export verificationkey`` writes it.

    ``alphabeta_12`` is e(alpha1, beta2) already in snarkjs's nested [2][3][2] string layout.
    """
    if len(ic) != n_public + 1:
        raise ValueError(f"IC has {len(ic)} points, expected nPublic + 1 = {n_public + 1}")
    return {
        "protocol": "groth16",
        "curve": "bn128",
        "nPublic": n_public,
        "vk_alpha_1": _g1_json(alpha1),
        "vk_beta_2": _g2_json(beta2),
        "vk_gamma_2": _g2_json(gamma2),
        "vk_delta_2": _g2_json(delta2),
        "vk_alphabeta_12": alphabeta_12,
        "IC": [_g1_json(p) for p in ic],
    }


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, exclusive: bool = False) -> bool:
    """Write ``obj`` as JSON (1-space indent, like snarkjs) so that ``path`` is never partial.

    The text goes to a temporary file in the same directory, is fsynced and then renamed over
    ``path`` (or, with ``exclusive``, linked there only if ``path`` does not exist yet: the
    result is then False when it did). See :func:`distprove.formats.atomic.write_atomic`.
    """
    data = json_bytes(obj)
    return write_atomic(path, lambda f: f.write(data), exclusive=exclusive)


# --- readers -------------------------------------------------------------------------


def _load(src: Source, default_name: str) -> tuple[Any, str]:
    """Return (parsed JSON, name for errors) for a path or an already-parsed object."""
    if isinstance(src, (dict, list)):
        return src, default_name
    name = os.fspath(src)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FormatError(name, f"cannot read: {e.strerror or e}") from e
    try:
        return json.loads(data), name
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise FormatError(name, f"not valid JSON: {str(e).splitlines()[0]}") from e


def _num(v: Any, name: str, what: str, bound: int, bound_name: str) -> int:
    """A canonical decimal string (or a plain int) in [0, bound)."""
    if isinstance(v, bool):
        raise FormatError(name, f"{what} is a boolean, expected a decimal string")
    if isinstance(v, int):
        n = v
    elif isinstance(v, str) and _DECIMAL.match(v):
        if len(v) > 100:
            raise FormatError(name, f"{what} has {len(v)} digits, it is >= {bound_name}")
        n = int(v)
    else:
        raise FormatError(name, f"{what} is {_short(v)}, expected a decimal string")
    if not 0 <= n < bound:
        raise FormatError(name, f"{what} = {n} is >= {bound_name}" if n >= 0 else f"{what} is negative")
    return n


def _short(v: Any) -> str:
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _fq2(v: Any, name: str, what: str) -> tuple[int, int]:
    if not isinstance(v, list) or len(v) != 2:
        raise FormatError(name, f"{what} must be a pair [c0, c1], got {_short(v)}")
    return (_num(v[0], name, f"{what}[0]", Q, "q"), _num(v[1], name, f"{what}[1]", Q, "q"))


def _point(g: Group, v: Any, name: str, what: str) -> Affine:
    """Parse a snarkjs point [x, y, z] (G1: ints, G2: pairs) into an affine point or None."""
    if not isinstance(v, list) or len(v) != 3:
        n = len(v) if isinstance(v, list) else type(v).__name__
        raise FormatError(name, f"{what} must be a list of 3 coordinates [x, y, z], got {n}")
    f = g.f
    if g is G1:
        x, y, z = (_num(c, name, f"{what}[{i}]", Q, "q") for i, c in enumerate(v))
    else:
        x, y, z = (_fq2(c, name, f"{what}[{i}]") for i, c in enumerate(v))
    if f.is_zero(z):
        return None
    if z != f.one:
        zi = f.inv(z)
        zi2 = f.sqr(zi)
        x, y = f.mul(x, zi2), f.mul(y, f.mul(zi2, zi))
    p = (x, y)
    if not bn254.is_on_curve(g, p):
        raise FormatError(name, f"{what} is not on the {g.name} curve")
    return p


def _check_tags(obj: dict[str, Any], name: str) -> None:
    if obj.get("protocol", "groth16") != "groth16":
        raise FormatError(name, f"protocol is {_short(obj['protocol'])}, only groth16 is supported")
    if obj.get("curve", "bn128") not in ("bn128", "bn254"):
        raise FormatError(name, f"curve is {_short(obj['curve'])}, only bn128 is supported")


def read_proof(src: Source) -> tuple[Affine, Affine, Affine]:
    """Read and validate a proof.json (path or parsed dict); return (pi_a, pi_b, pi_c) affine."""
    obj, name = _load(src, "<proof>")
    if not isinstance(obj, dict):
        raise FormatError(name, "a proof must be a JSON object with pi_a, pi_b, pi_c")
    _check_tags(obj, name)
    for k in ("pi_a", "pi_b", "pi_c"):
        if k not in obj:
            raise FormatError(name, f"missing {k}")
    return (
        _point(G1, obj["pi_a"], name, "pi_a"),
        _point(G2, obj["pi_b"], name, "pi_b"),
        _point(G1, obj["pi_c"], name, "pi_c"),
    )


def read_public(src: Source) -> list[int]:
    """Read and validate a public.json (path or parsed list); every value must be in [0, r)."""
    obj, name = _load(src, "<public>")
    if not isinstance(obj, list):
        raise FormatError(name, "public signals must be a JSON array of decimal strings")
    return [_num(v, name, f"public signal {i}", R, "r") for i, v in enumerate(obj)]


def read_vk(src: Source) -> VerificationKey:
    """Read and validate a verification_key.json (path or parsed dict)."""
    obj, name = _load(src, "<vk>")
    if not isinstance(obj, dict):
        raise FormatError(name, "a verification key must be a JSON object")
    _check_tags(obj, name)
    for k in ("nPublic", "vk_alpha_1", "vk_beta_2", "vk_gamma_2", "vk_delta_2", "IC"):
        if k not in obj:
            raise FormatError(name, f"missing {k}")
    n_public = obj["nPublic"]
    if isinstance(n_public, bool) or not isinstance(n_public, int) or n_public < 0:
        raise FormatError(name, f"nPublic is {_short(n_public)}, expected a non-negative integer")
    ic = obj["IC"]
    if not isinstance(ic, list) or len(ic) != n_public + 1:
        n = len(ic) if isinstance(ic, list) else type(ic).__name__
        raise FormatError(name, f"IC has {n} points, expected nPublic + 1 = {n_public + 1}")
    return VerificationKey(
        n_public=n_public,
        alpha1=_point(G1, obj["vk_alpha_1"], name, "vk_alpha_1"),
        beta2=_point(G2, obj["vk_beta_2"], name, "vk_beta_2"),
        gamma2=_point(G2, obj["vk_gamma_2"], name, "vk_gamma_2"),
        delta2=_point(G2, obj["vk_delta_2"], name, "vk_delta_2"),
        ic=[_point(G1, p, name, f"IC[{i}]") for i, p in enumerate(ic)],
    )
