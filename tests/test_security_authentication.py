"""Both ACL 2.0 signature schemes, signing and verifying, against the official clients' algorithm.

Expected signatures are computed here from the documented algorithms (Python client
``rocketmq/v5/util/signature.py``; classic ``AclClientRPCHook`` with
``AclUtils.combineRequestContent``) with ``hmac`` directly, never with the code under test, and
the official Python client 5.1.2's own header is verified in a subprocess.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import pathlib
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.security import authentication, metadata_store, model, signing

AS = authentication.AuthStatus


def _store(tmp_path: pathlib.Path, *users: model.User) -> metadata_store.AuthMetadataStore:
    store = metadata_store.AuthMetadataStore.open(tmp_path / "auth")
    for user in users:
        store.create_user(user)
    return store


ALICE = model.User(model.Username("alice"), "alice-secret-1")


class _Users:
    """A user directory of fixed users (no file)."""

    def __init__(self, *users: model.User) -> None:
        self.users: dict[str, model.User] = {u.username: u for u in users}

    def find_user(self, username: str) -> model.User | None:
        return self.users.get(username)


USERS = _Users(
    ALICE,
    model.User(model.Username("bob"), "bob-secret", user_status=model.UserStatus.DISABLE),
)


def _hex(secret: str, data: str) -> str:
    return hmac.new(secret.encode(), data.encode(), hashlib.sha1).hexdigest()


def test_grpc_signing_matches_the_python_clients_algorithm() -> None:
    """``sign_grpc`` yields the date-time and the exact header the Python v5 client builds."""
    pairs = signing.sign_grpc(
        access_key="alice", secret_key="alice-secret-1", date_time="20250507T101500Z"
    )
    expected = (
        "MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, "
        f"Signature={_hex('alice-secret-1', '20250507T101500Z')}"
    )
    assert pairs == (("x-mq-date-time", "20250507T101500Z"), ("authorization", expected))
    # pinned, so a change of algorithm cannot pass by changing both sides
    assert _hex("sk", "20250101T000000Z") == "b9e25ae2b112edaa1724432269b4d28e01e325bd"
    assert signing.grpc_signature_hex("sk", "20250101T000000Z") == _hex("sk", "20250101T000000Z")


def test_grpc_date_time_is_utc_in_the_clients_format() -> None:
    """The date-time is ``yyyyMMdd'T'HHmmss'Z'`` of the instant in UTC."""
    cet = datetime.timezone(datetime.timedelta(hours=2))
    now = datetime.datetime(2025, 5, 7, 12, 15, 0, tzinfo=cet)
    assert signing.grpc_date_time(now) == "20250507T101500Z"


def test_the_official_python_clients_header_authenticates() -> None:
    """The metadata the official Python client 5.1.2 builds verifies for the right secret only."""
    probe = (
        "import json\n"
        "from types import SimpleNamespace as S\n"
        "from rocketmq.v5.util.signature import Signature\n"
        "config = S(credentials=S(ak='alice', sk='alice-secret-1'), namespace='')\n"
        "print(json.dumps(dict(Signature.metadata(config, 'client-1'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    metadata = json.loads(done.stdout)
    ok = authentication.authenticate_grpc(
        USERS, authorization=metadata["authorization"], date_time=metadata["x-mq-date-time"]
    )
    assert ok.status is AS.OK and ok.subject == model.Subject(model.Username("alice"))
    other = _Users(model.User(model.Username("alice"), "another-secret"))
    bad = authentication.authenticate_grpc(
        other, authorization=metadata["authorization"], date_time=metadata["x-mq-date-time"]
    )
    assert bad.status is AS.BAD_SIGNATURE


@pytest.mark.parametrize(
    ("credential", "hex_case"),
    [("alice", str.lower), ("alice", str.upper), ("alice//Rocketmq", str.lower)],
    ids=["python", "java-node-upper-hex", "go-credential-suffix"],
)
def test_every_v5_clients_header_shape_verifies(credential: str, hex_case: object) -> None:
    """Lower or upper hex and Go's ``AK//Rocketmq`` credential all authenticate as ``alice``."""
    assert callable(hex_case)
    sig = hex_case(_hex("alice-secret-1", "20250507T101500Z"))
    header = (
        f"MQv2-HMAC-SHA1 Credential={credential}, SignedHeaders=x-mq-date-time, Signature={sig}"
    )
    result = authentication.authenticate_grpc(
        USERS, authorization=header, date_time="20250507T101500Z"
    )
    assert (result.status, result.username) == (AS.OK, "alice")


@pytest.mark.parametrize(
    ("authorization", "date_time", "status", "message"),
    [
        (None, "20250507T101500Z", AS.MISSING, "username cannot be null."),
        ("", "x", AS.MISSING, "username cannot be null."),
        (
            "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00",
            "x",
            AS.MISSING,
            "username cannot be null.",
        ),
        ("MQv2-HMAC-SHA1 Credential=alice", None, AS.MALFORMED, "datetime is null."),
        ("MQv2-HMAC-SHA1", "x", AS.MALFORMED, "authentication header is incorrect."),
        ("MQv2 Credential=alice, junk", "x", AS.MALFORMED, "authentication keyValues"),
        ("MQv2 Credential=alice, Signature=zz", "x", AS.MALFORMED, "create authentication"),
        ("MQv2 Credential=alice, Signature=a b", "x", AS.MALFORMED, "create authentication"),
        ("MQv2 Credential=carol, Signature=00", "x", AS.UNKNOWN_USER, "User:carol is not found."),
        ("MQv2 Credential=bob, Signature=00", "x", AS.DISABLED, "User:bob is disabled."),
        ("MQv2 Credential=alice, Signature=00", "x", AS.BAD_SIGNATURE, "check signature failed"),
        ("MQv2 Credential=alice", "x", AS.BAD_SIGNATURE, "User:alice check signature failed."),
        ("MQv2 Credential=alice" + "," * 2000, "x", AS.MALFORMED, "too long"),
    ],
)
def test_grpc_failures_have_rocketmqs_status_and_text(
    authorization: str | None, date_time: str | None, status: AS, message: str
) -> None:
    """Each broken or wrong gRPC credential gets its status and RocketMQ's message."""
    result = authentication.authenticate_grpc(
        USERS, authorization=authorization, date_time=date_time
    )
    assert result.status is status
    assert message in result.message
    assert not result.ok and result.subject is None


def _classic(ext: dict[str, str], body: bytes, sk: str) -> str:
    """``AclClientRPCHook``: values by key (Java order = ASCII here), concatenated, + body."""
    content = "".join(ext[k] for k in sorted(ext) if k != "Signature").encode() + body
    return base64.b64encode(hmac.new(sk.encode(), content, hashlib.sha1).digest()).decode()


def test_remoting_signing_matches_aclclientrpchook() -> None:
    """``sign_remoting`` adds AccessKey, SecurityToken and the base64 HMAC over the sorted
    values plus body, exactly as the classic Java client does."""
    header = {"b": "TopicA", "a": "ProducerGroup", "c": "TBW102", "d": "4", "bname": "broker-a"}
    signed = signing.sign_remoting(
        header,
        b"hello",
        access_key="rocketmq2",
        secret_key="12345678",
        version=479,
        security_token="tok",
    )
    expect_fields = {**header, "AccessKey": "rocketmq2", "SecurityToken": "tok"}
    assert signed == {**expect_fields, "Signature": _classic(expect_fields, b"hello", "12345678")}
    assert "Signature" not in header  # the caller's mapping is untouched
    # content: AccessKey, SecurityToken, a, b, bname, c, d in ASCII order, then the body
    assert (
        signing.remoting_content(expect_fields, b"hello", version=479)
        == b"rocketmq2tokProducerGroupTopicAbroker-aTBW1024hello"
    )


def test_remoting_content_follows_java_string_order_and_the_unique_key_rule() -> None:
    """Keys sort by UTF-16 code unit (Java ``TreeMap``), and ``_UNIQUE_KEY_QUERY`` is left out
    up to version 399 (#5310)."""
    fields = {"\uffff": "bmp-last", "\U00010000": "astral", "_UNIQUE_KEY_QUERY": "true"}
    # Java: "_" (5F) < U+10000 (D800 DC00) < U+FFFF; Python's code-point order puts FFFF first
    assert signing.remoting_content(fields, b"!", version=400) == b"true" + b"astralbmp-last!"
    assert signing.remoting_content(fields, b"", version=399) == b"astralbmp-last"


def test_remoting_verification_outcomes() -> None:
    """A classic request signed with the right secret is OK; other cases get their status."""
    ext = signing.sign_remoting(
        {"topic": "T", "queueId": "0"},
        b"body",
        access_key="alice",
        secret_key="alice-secret-1",
        version=479,
    )
    ok = authentication.authenticate_remoting(USERS, ext_fields=ext, body=b"body", version=479)
    assert ok.status is AS.OK and ok.user is not None and ok.user.username == "alice"
    cases = [
        ({**ext, "topic": "U"}, b"body", AS.BAD_SIGNATURE),  # a signed field changed
        (ext, b"other", AS.BAD_SIGNATURE),  # the body changed
        ({k: v for k, v in ext.items() if k != "Signature"}, b"body", AS.BAD_SIGNATURE),
        ({**ext, "Signature": "é" * 28}, b"body", AS.BAD_SIGNATURE),  # non-ASCII, no TypeError
        ({**ext, "AccessKey": "carol"}, b"body", AS.UNKNOWN_USER),
        ({**ext, "AccessKey": "bob"}, b"body", AS.DISABLED),
        ({"topic": "T"}, b"body", AS.MISSING),
        ({**ext, "AccessKey": ""}, b"body", AS.MISSING),
    ]
    for fields, body, status in cases:
        result = authentication.authenticate_remoting(
            USERS, ext_fields=fields, body=body, version=479
        )
        assert result.status is status, (fields, result)
        assert "alice-secret-1" not in result.message


def test_keyless_concatenation_is_verified_as_rocketmq_does() -> None:
    """Values are concatenated without keys, so moving text between two fields keeps the
    signature valid (documented upstream weakness 2, mirrored byte for byte)."""
    ext = signing.sign_remoting(
        {"a": "xy", "b": ""}, b"", access_key="alice", secret_key="alice-secret-1", version=479
    )
    moved = {**ext, "a": "x", "b": "y"}
    result = authentication.authenticate_remoting(USERS, ext_fields=moved, body=b"", version=479)
    assert result.status is AS.OK


_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
_names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=20)


@settings(max_examples=150, deadline=None)
@given(
    name=_names.filter(lambda n: not (set(n) & model.USERNAME_FORBIDDEN_CHARS) and n.isprintable()),
    secret=_text.filter(str.strip),
    date_time=_text.filter(bool),
)
def test_grpc_signing_round_trips(name: str, secret: str, date_time: str) -> None:
    """Whatever the user and date-time, what ``sign_grpc`` produces verifies, and a different
    secret does not."""
    user = model.User(model.Username(name), secret)
    pairs = dict(signing.sign_grpc(access_key=name, secret_key=secret, date_time=date_time))
    result = authentication.authenticate_grpc(
        _Users(user), authorization=pairs["authorization"], date_time=pairs["x-mq-date-time"]
    )
    assert result.status is AS.OK
    wrong = _Users(model.User(model.Username(name), secret + "!"))
    result = authentication.authenticate_grpc(
        wrong, authorization=pairs["authorization"], date_time=pairs["x-mq-date-time"]
    )
    assert result.status is AS.BAD_SIGNATURE


@settings(max_examples=150, deadline=None)
@given(
    fields=st.dictionaries(_text.filter(lambda k: k not in ("AccessKey", "Signature")), _text),
    body=st.binary(max_size=64),
    version=st.integers(0, 600),
    token=st.none() | _text,
)
def test_remoting_signing_round_trips(
    fields: dict[str, str], body: bytes, version: int, token: str | None
) -> None:
    """Whatever the ext fields, body and version, ``sign_remoting`` output verifies, and equals
    the independent computation of the classic hook."""
    signed = signing.sign_remoting(
        fields,
        body,
        access_key="alice",
        secret_key="alice-secret-1",
        version=version,
        security_token=token,
    )
    result = authentication.authenticate_remoting(
        USERS, ext_fields=signed, body=body, version=version
    )
    assert result.status is AS.OK
    if all(ord(c) < 0x10000 for k in signed for c in k) and not (
        version <= 399 and "_UNIQUE_KEY_QUERY" in signed
    ):
        assert signed["Signature"] == _classic(signed, body, "alice-secret-1")


@settings(max_examples=400, deadline=None)
@given(authorization=st.none() | st.text(max_size=200), date_time=st.none() | st.text(max_size=80))
def test_any_grpc_metadata_yields_a_result(
    authorization: str | None, date_time: str | None
) -> None:
    """Arbitrary ``authorization``/``x-mq-date-time`` values never raise and never pass."""
    result = authentication.authenticate_grpc(
        USERS, authorization=authorization, date_time=date_time
    )
    assert isinstance(result.status, AS)
    assert result.status is not AS.OK


_structured = st.builds(
    lambda alg, items: f"{alg} " + ", ".join(items),
    st.sampled_from(["MQv2-HMAC-SHA1", "", "x"]),
    st.lists(
        st.builds(
            lambda k, v: f"{k}={v}",
            st.sampled_from(["Credential", "Signature", "SignedHeaders", "credential", ""]),
            st.sampled_from(["alice", "bob", "", "00", "ZZ", "alice/x", "é", "0" * 40]) | _text,
        ),
        max_size=5,
    ),
)


@settings(max_examples=400, deadline=None)
@given(authorization=_structured, date_time=st.none() | _text)
def test_near_miss_grpc_headers_yield_a_result(authorization: str, date_time: str | None) -> None:
    """Headers built from the real items in odd combinations never raise and never pass."""
    result = authentication.authenticate_grpc(
        USERS, authorization=authorization, date_time=date_time
    )
    assert result.status is not AS.OK


@settings(max_examples=400, deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from(["AccessKey", "Signature", "SecurityToken", "topic"]) | _text,
        st.sampled_from(["alice", "bob", "", "=", "AAAA"]) | st.text(max_size=40),
        max_size=6,
    ),
    body=st.binary(max_size=32),
    version=st.integers(-(2**31), 2**31),
)
def test_any_ext_fields_yield_a_result(fields: dict[str, str], body: bytes, version: int) -> None:
    """Arbitrary ext fields (surrogates included) never raise and never pass."""
    result = authentication.authenticate_remoting(
        USERS, ext_fields=fields, body=body, version=version
    )
    assert result.status is not AS.OK


def test_identity_cache_serves_only_identical_verified_credentials(tmp_path: pathlib.Path) -> None:
    """A connection's verified credentials are served from the cache; a changed signature or
    content, another connection or a cleared cache verifies again; the cache stays bounded."""
    store = _store(tmp_path, ALICE)
    cache = authentication.IdentityCache(entries_max=2)
    ext = signing.sign_remoting(
        {"topic": "T"}, b"", access_key="alice", secret_key="alice-secret-1", version=479
    )
    read = authentication.read_remoting(ext, b"", version=479)
    assert isinstance(read, authentication.SignedRequest)
    assert cache.authenticate("c1", read, store).ok
    store.update_user("alice", password="rotated-secret")  # the cache must be cleared on change
    assert cache.authenticate("c1", read, store).ok  # served from the cache, as documented
    cache.clear()
    assert cache.authenticate("c1", read, store).status is AS.BAD_SIGNATURE
    forged = authentication.read_remoting({**ext, "topic": "U"}, b"", version=479)
    assert isinstance(forged, authentication.SignedRequest)
    assert cache.authenticate("c1", forged, store).status is AS.BAD_SIGNATURE
    fresh = signing.sign_remoting(
        {"topic": "T"}, b"", access_key="alice", secret_key="rotated-secret", version=479
    )
    good = authentication.read_remoting(fresh, b"", version=479)
    assert isinstance(good, authentication.SignedRequest)
    for connection in ("c1", "c2", "c3"):
        assert cache.authenticate(connection, good, store).ok
    assert len(cache) == 2
    cache.forget_connection("c3")
    assert len(cache) == 1


@settings(max_examples=200, deadline=None)
@given(fields=st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=6))
def test_remoting_content_orders_keys_as_java_for_any_keys(fields: dict[str, str]) -> None:
    """The ASCII fast path and the UTF-16 sort give Java's ``TreeMap`` order for any keys (BMP,
    astral, ASCII mixed)."""
    java = sorted(fields, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    expected = "".join(fields[k] for k in java if k != signing.SIGNATURE_FIELD).encode(
        "utf-8", "surrogatepass"
    )
    assert signing.remoting_content(fields, b"", version=500) == expected
