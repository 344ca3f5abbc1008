"""Generated secret keys (``ariane.security.keys``): URL-safe, never a leading "-", so every
command line that takes one as a separate word (argparse, RocketMQ's commons-cli) parses it."""

from __future__ import annotations

import re
import secrets

import pytest

from ariane import cli
from ariane.security import keys

URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def test_no_generated_key_starts_with_a_dash() -> None:
    """4,096 keys: ``token_urlsafe`` alone would start about 64 of them with "-" (the chance
    that none does is below 1e-27), so this fails if the rule is lost."""
    drawn = [keys.generate_secret_key(16) for _ in range(4096)]
    assert not [k for k in drawn if k.startswith("-")]
    assert all(URL_SAFE.fullmatch(k) for k in drawn)
    assert len(set(drawn)) == len(drawn)


def test_a_leading_dash_is_replaced_and_the_length_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: "-" + "A" * 42)
    key = keys.generate_secret_key(32)
    assert len(key) == 43 and key[0].isalpha() and key[1:] == "A" * 42


@pytest.mark.parametrize("nbytes", [keys.KEY_BYTES_MIN - 1, keys.KEY_BYTES_MAX + 1, 0, -1])
def test_sizes_outside_the_bounds_are_refused(nbytes: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        keys.generate_secret_key(nbytes)


def test_a_generated_key_parses_as_the_admin_password_as_a_separate_word() -> None:
    """``ariane admin user create -p KEY``: the form the README shows."""
    parser = cli.build_parser()
    for _ in range(256):
        key = keys.generate_secret_key(24)
        args = parser.parse_args(["admin", "user", "create", "-u", "app", "-p", key])
        assert args.password == key
