"""ECDSA signature verification with the standard library alone: the NIST curves P-256, P-384 and P-521.

Synth checks the signed build statement (deployment_spec.builds.statement) with the spec's public key, and the
construct library's base install has no ``cryptography`` package (only aws-cdk-lib, constructs and PyYAML), so
the check is written here: SEC 1 v2.0, section 4.1.4 (verification), on the curves of FIPS 186-5 / SP 800-186,
each with the hash model-signing pairs with it (P-256: SHA-256, P-384: SHA-384, P-521: SHA-512). Only
verification: every input is public, so the arithmetic need not be constant-time. Signing stays with
``cryptography`` (model_build). tests/spec/test_ecdsa_verify.py holds it against ``cryptography``'s own
signatures and refusals on all three curves.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable, Optional

Point = Optional[tuple[int, int]]  # None: the point at infinity


@dataclasses.dataclass(frozen=True)
class Curve:
    """A short Weierstrass curve y² = x³ + ax + b over GF(p) with a generator of prime order n (cofactor 1)."""

    name: str
    p: int
    a: int
    b: int
    gx: int
    gy: int
    n: int
    hash: Callable[[bytes], Any]  # hashlib.sha256 and its kin


_P256 = Curve(
    "P-256", 2**256 - 2**224 + 2**192 + 2**96 - 1, -3,
    0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B,
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
    0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551, hashlib.sha256)
_P384 = Curve(
    "P-384", 2**384 - 2**128 - 2**96 + 2**32 - 1, -3,
    0xB3312FA7E23EE7E4988E056BE3F82D19181D9C6EFE8141120314088F5013875AC656398D8A2ED19D2A85C8EDD3EC2AEF,
    0xAA87CA22BE8B05378EB1C71EF320AD746E1D3B628BA79B9859F741E082542A385502F25DBF55296C3A545E3872760AB7,
    0x3617DE4A96262C6F5D9E98BF9292DC29F8F41DBD289A147CE9DA3113B5F0B8C00A60B1CE1D7E819D7A431D7C90EA0E5F,
    0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973,
    hashlib.sha384)
_P521 = Curve(
    "P-521", 2**521 - 1, -3,
    int("0051953EB9618E1C9A1F929A21A0B68540EEA2DA725B99B315F3B8B489918EF109E156193951EC7E937B1652C0BD3BB1BF073573DF88"
        "3D2C34F1EF451FD46B503F00", 16),
    int("00C6858E06B70404E9CD9E3ECB662395B4429C648139053FB521F828AF606B4D3DBAA14B5E77EFE75928FE1DC127A2FFA8DE3348B3C1"
        "856A429BF97E7E31C2E5BD66", 16),
    int("011839296A789A3BC0045C8A5FB42C7D1BD998F54449579B446817AFBD17273E662C97EE72995EF42640C550B9013FAD0761353C7086"
        "A272C24088BE94769FD16650", 16),
    int("01FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFA51868783BF2F966B7FCC0148F709A5D03BB5C9B889"
        "9C47AEBB6FB71E91386409", 16),
    hashlib.sha512)
# The named-curve OIDs of RFC 5480 (secp256r1, secp384r1, secp521r1), DER-encoded without tag and length.
CURVES = {bytes.fromhex("2a8648ce3d030107"): _P256, bytes.fromhex("2b81040022"): _P384,
          bytes.fromhex("2b81040023"): _P521}
_EC_PUBLIC_KEY = bytes.fromhex("2a8648ce3d0201")  # id-ecPublicKey, 1.2.840.10045.2.1


class KeyFormatError(ValueError):
    """Not the DER SubjectPublicKeyInfo of an EC key on P-256, P-384 or P-521."""


@dataclasses.dataclass(frozen=True)
class PublicKey:
    curve: Curve
    x: int
    y: int


def _tlv(data: bytes, at: int, tag: int) -> tuple[bytes, int]:
    """The value of the DER element of ``tag`` at ``at``, and where the next element starts."""
    if at + 2 > len(data) or data[at] != tag:
        raise KeyFormatError(f"expected DER tag 0x{tag:02x} at byte {at}")
    length, at = data[at + 1], at + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or at + count > len(data):
            raise KeyFormatError("a DER length that is not definite")
        length, at = int.from_bytes(data[at:at + count], "big"), at + count
    if at + length > len(data):
        raise KeyFormatError("a DER element longer than its data")
    return data[at:at + length], at + length


def public_key(der: bytes) -> PublicKey:
    """The key of a DER SubjectPublicKeyInfo (RFC 5480: id-ecPublicKey, a named curve, an uncompressed point),
    refused unless the point lies on the curve."""
    spki, end = _tlv(der, 0, 0x30)
    if end != len(der):
        raise KeyFormatError("bytes after the SubjectPublicKeyInfo")
    algorithm, at = _tlv(spki, 0, 0x30)
    kind, inner = _tlv(algorithm, 0, 0x06)
    if kind != _EC_PUBLIC_KEY:
        raise KeyFormatError("not an elliptic-curve key (id-ecPublicKey)")
    oid, _ = _tlv(algorithm, inner, 0x06)
    curve = CURVES.get(oid)
    if curve is None:
        raise KeyFormatError("a curve other than P-256, P-384 or P-521")
    bits, _ = _tlv(spki, at, 0x03)
    size = (curve.p.bit_length() + 7) // 8
    if len(bits) != 2 + 2 * size or bits[:2] != b"\x00\x04":
        raise KeyFormatError("not an uncompressed point")
    x, y = int.from_bytes(bits[2:2 + size], "big"), int.from_bytes(bits[2 + size:], "big")
    if not (x < curve.p and y < curve.p and (y * y - x * x * x - curve.a * x - curve.b) % curve.p == 0):
        raise KeyFormatError("a point that is not on the curve")
    return PublicKey(curve, x, y)


def _signature(der: bytes) -> Optional[tuple[int, int]]:
    """(r, s) of a DER ECDSA-Sig-Value; None if it is not one."""
    try:
        body, end = _tlv(der, 0, 0x30)
        r, at = _tlv(body, 0, 0x02)
        s, rest = _tlv(body, at, 0x02)
    except KeyFormatError:
        return None
    if end != len(der) or rest != len(body) or not r or not s:
        return None
    return int.from_bytes(r, "big", signed=True), int.from_bytes(s, "big", signed=True)


def _add(c: Curve, one: Point, two: Point) -> Point:
    if one is None:
        return two
    if two is None:
        return one
    (x1, y1), (x2, y2) = one, two
    if x1 == x2:
        if (y1 + y2) % c.p == 0:
            return None
        slope = (3 * x1 * x1 + c.a) * pow(2 * y1, -1, c.p) % c.p
    else:
        slope = (y2 - y1) * pow(x2 - x1, -1, c.p) % c.p
    x3 = (slope * slope - x1 - x2) % c.p
    return x3, (slope * (x1 - x3) - y1) % c.p


def _combination(c: Curve, u1: int, u2: int, q: tuple[int, int]) -> Point:
    """u1·G + u2·Q, both scalars walked at once from the top bit (Shamir's trick)."""
    g = (c.gx, c.gy)
    table = {(1, 0): g, (0, 1): q, (1, 1): _add(c, g, q)}
    out: Point = None
    for bit in range(max(u1.bit_length(), u2.bit_length()) - 1, -1, -1):
        out = _add(c, out, out)
        pick = ((u1 >> bit) & 1, (u2 >> bit) & 1)
        if pick != (0, 0):
            out = _add(c, out, table[pick])
    return out


def verify(key: PublicKey, signature: bytes, message: bytes) -> bool:
    """True when ``signature`` (DER) is the key's ECDSA signature of ``message`` with the curve's hash."""
    c = key.curve
    parsed = _signature(signature)
    if parsed is None:
        return False
    r, s = parsed
    if not (0 < r < c.n and 0 < s < c.n):
        return False
    digest = c.hash(message).digest()
    e = int.from_bytes(digest, "big") >> max(0, 8 * len(digest) - c.n.bit_length())
    w = pow(s, -1, c.n)
    point = _combination(c, e * w % c.n, r * w % c.n, (key.x, key.y))
    return point is not None and point[0] % c.n == r
