"""The standard-library ECDSA verifier synth checks the signed build statement with (deployment_spec/builds/ecdsa_verify.py),
held to ``cryptography`` (OpenSSL): its curve constants are OpenSSL's, it accepts what OpenSSL signs on P-256, P-384
and P-521 (random and deterministic nonces), and refuses a changed message, another key's signature, a changed or
out-of-range signature, and keys it cannot verify with."""
from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from deployment_spec.builds import ecdsa_verify

CURVES = [(ec.SECP256R1(), hashes.SHA256()), (ec.SECP384R1(), hashes.SHA384()), (ec.SECP521R1(), hashes.SHA512())]


def _der(public: object) -> bytes:
    return public.public_bytes(serialization.Encoding.DER,  # type: ignore[attr-defined]
                               serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.mark.parametrize("curve, digest", CURVES, ids=lambda c: getattr(c, "name", ""))
def test_the_curve_constants_are_openssl_s(curve, digest):
    key = ecdsa_verify.public_key(_der(ec.generate_private_key(curve).public_key()))
    one = ec.derive_private_key(1, curve).public_key().public_numbers()  # the generator
    assert (one.x, one.y) == (key.curve.gx, key.curve.gy)
    last = ec.derive_private_key(key.curve.n - 1, curve).public_key().public_numbers()  # n - 1: minus the generator
    assert (last.x, last.y) == (key.curve.gx, key.curve.p - key.curve.gy)
    with pytest.raises(ValueError):
        ec.derive_private_key(key.curve.n, curve)  # n is the order: OpenSSL takes no larger scalar


@pytest.mark.parametrize("curve, digest", CURVES, ids=lambda c: getattr(c, "name", ""))
def test_it_accepts_what_openssl_signs_and_refuses_every_change(curve, digest):
    private, other = ec.generate_private_key(curve), ec.generate_private_key(curve)
    key = ecdsa_verify.public_key(_der(private.public_key()))
    for deterministic in (False, True, False, False):
        message = os.urandom(200)
        signature = private.sign(message, ec.ECDSA(digest, deterministic_signing=deterministic))
        assert ecdsa_verify.verify(key, signature, message)
        assert not ecdsa_verify.verify(key, signature, message[:-1] + bytes([message[-1] ^ 1]))
        assert not ecdsa_verify.verify(key, other.sign(message, ec.ECDSA(digest)), message)
        r, s = decode_dss_signature(signature)
        n = key.curve.n
        for changed in ((r, s ^ 1), (r ^ 1, s), (r, n - s + n), (0, s), (r, 0), (r + n, s)):
            assert not ecdsa_verify.verify(key, encode_dss_signature(*changed), message)
        assert not ecdsa_verify.verify(key, signature[:-1], message)
        assert not ecdsa_verify.verify(key, signature + b"\0", message)
        assert not ecdsa_verify.verify(key, b"not DER", message)
    # The twin of the s-for-n-minus-s case above: OpenSSL itself accepts (r, n - s), and so does this.
    signature = private.sign(b"m", ec.ECDSA(digest))
    r, s = decode_dss_signature(signature)
    private.public_key().verify(encode_dss_signature(r, key.curve.n - s), b"m", ec.ECDSA(digest))
    assert ecdsa_verify.verify(key, encode_dss_signature(r, key.curve.n - s), b"m")


def test_keys_it_cannot_verify_with_are_refused():
    rsa_key = _der(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key())
    with pytest.raises(ecdsa_verify.KeyFormatError, match="not an elliptic-curve key"):
        ecdsa_verify.public_key(rsa_key)
    with pytest.raises(ecdsa_verify.KeyFormatError, match="a curve other than P-256, P-384 or P-521"):
        ecdsa_verify.public_key(_der(ec.generate_private_key(ec.SECP256K1()).public_key()))
    good = bytearray(_der(ec.generate_private_key(ec.SECP256R1()).public_key()))
    good[-1] ^= 1  # y no longer matches x
    with pytest.raises(ecdsa_verify.KeyFormatError, match="not on the curve"):
        ecdsa_verify.public_key(bytes(good))
    with pytest.raises(ecdsa_verify.KeyFormatError, match="bytes after the SubjectPublicKeyInfo"):
        ecdsa_verify.public_key(bytes(good) + b"\0")
