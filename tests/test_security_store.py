"""The users+ACLs metadata store: RocketMQ's admin rules, atomic mode-0600 file, crash safety,
bounds, bootstrap users, secret-free views, and the ``[auth]`` settings."""

from __future__ import annotations

import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.broker import settings as broker_settings
from ariane.security import errors, metadata_store, model
from ariane.security import settings as auth_settings

Store = metadata_store.AuthMetadataStore


def _user(name: str, secret: str = "s3cret-value", **kw: object) -> model.User:
    return model.User(model.Username(name), secret, **kw)  # type: ignore[arg-type]


def _acl(name: str, *entries: tuple[str, str, str]) -> model.Acl:
    parsed = tuple(model.PolicyEntry.of(r, a.split(","), d) for r, a, d in entries)
    return model.Acl(
        model.Subject(model.Username(name)), (model.Policy(model.PolicyType.CUSTOM, parsed),)
    )


def test_admin_rules_mirror_rocketmqs_managers(tmp_path: pathlib.Path) -> None:
    """Create/update/delete of users and ACLs follow RocketMQ's manager rules and texts."""
    store = Store.open(tmp_path)
    store.create_user(_user("alice"))
    with pytest.raises(errors.AuthMetadataError, match="The user is existed"):
        store.create_user(_user("alice"))
    with pytest.raises(errors.AuthMetadataError, match="The user is not exist"):
        store.update_user("carol", password="x")
    with pytest.raises(errors.AuthMetadataError, match=r"The subject of User:carol is not exist\."):
        store.put_acl(_acl("carol", ("Topic:t", "Pub", "Allow")))
    with pytest.raises(errors.AuthMetadataError, match=r"The acl is not exist\."):
        store.delete_acl(model.Subject(model.Username("alice")))
    view = store.update_user("alice", user_type=model.UserType.SUPER, password=" ")
    assert view.user_type is model.UserType.SUPER
    assert store.find_user("alice") == _user("alice", user_type=model.UserType.SUPER)  # blank kept
    store.put_acl(_acl("alice", ("Topic:a", "Pub", "Allow")))
    merged = store.put_acl(_acl("alice", ("Topic:b", "Sub", "Deny")))
    assert [e.resource.key for e in merged.policies[0].entries] == ["Topic:a", "Topic:b"]
    store.delete_acl(merged.subject, resource=model.Resource.parse("Topic:a"))
    assert store.list_acls(resource_filter="Topic:a") == []
    assert [a.subject.key for a in store.list_acls(subject_filter="ali")] == ["User:alice"]
    assert store.delete_user("alice") and not store.delete_user("alice")
    assert store.find_acl(merged.subject) is None  # deleting a user deletes its ACL


def test_views_and_logs_never_hold_the_secret(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Get/list views, reprs and log lines of every change omit the password."""
    caplog.set_level("DEBUG")
    store = Store.open(tmp_path)
    store.create_user(_user("alice", "very-secret-1"))
    store.update_user("alice", password="very-secret-2", user_status=model.UserStatus.DISABLE)
    store.put_acl(_acl("alice", ("Topic:a", "Pub", "Allow")))
    shown = [
        repr(store.get_user("alice")),
        repr(store.list_users("al")),
        repr(store.find_user("alice")),
        str(store.get_user("alice").to_info()),  # type: ignore[union-attr]
        caplog.text,
        repr(auth_settings.InitUser("root", "very-secret-3")),
    ]
    for text in shown:
        assert "very-secret" not in text
    assert "alice" in caplog.text
    assert store.list_users("zz") == []


def test_file_is_private_atomic_and_reloads(tmp_path: pathlib.Path) -> None:
    """The file is mode 0600 in a 0700 directory, reloads equal, and a leftover temporary
    file from an interrupted write is ignored."""
    directory = tmp_path / "auth"
    store = Store.open(directory)
    store.create_user(_user("alice"))
    store.put_acl(_acl("alice", ("Topic:a*", "Pub,Sub", "Allow")))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    (directory / f".{metadata_store.FILE_NAME}.tmp").write_bytes(b'{"torn')
    again = Store.open(directory)
    assert again.find_user("alice") == store.find_user("alice")
    assert again.get_acl(model.Subject(model.Username("alice"))) == store.get_acl(
        model.Subject(model.Username("alice"))
    )


def test_a_failed_write_changes_nothing(tmp_path: pathlib.Path) -> None:
    """When the file write fails, memory and file keep the previous state."""
    fail = {"now": False}

    def writer(path: pathlib.Path, data: bytes) -> None:
        if fail["now"]:
            raise OSError(28, "No space left on device")
        metadata_store.write_atomically(path, data)

    store = Store.open(tmp_path, writer=writer)
    store.create_user(_user("alice"))
    fail["now"] = True
    with pytest.raises(OSError):
        store.create_user(_user("bob"))
    with pytest.raises(OSError):
        store.delete_user("alice")
    assert store.find_user("bob") is None and store.find_user("alice") is not None
    assert [u.username for u in Store.open(tmp_path).list_users()] == ["alice"]


def test_replace_adopts_a_copy_in_one_write_only_when_different(tmp_path: pathlib.Path) -> None:
    """``replace`` (a slave adopting its master's users and ACLs) writes once when the copy
    differs and never when it is equal, drops users and ACLs the copy lacks except the kept
    bootstrap names, lets the copy's version of a kept name win, and refuses a copy over
    ``users_max`` or with an orphan ACL without changing anything."""
    writes: list[bytes] = []

    def writer(path: pathlib.Path, data: bytes) -> None:
        writes.append(data)
        metadata_store.write_atomically(path, data)

    store = Store.open(tmp_path, users_max=3, writer=writer)
    for name in ("root", "inner", "stale"):
        store.create_user(_user(name, user_type=model.UserType.SUPER))
    store.put_acl(_acl("stale", ("Topic:t", "Pub", "Allow")))
    master_users = [_user("alice", "alice-secret"), _user("inner", "rotated-secret")]
    master_acls = [_acl("alice", ("Topic:orders", "Pub,Sub", "Allow"))]
    writes.clear()
    assert store.replace(master_users, master_acls, keep=("root", "inner"))
    assert len(writes) == 1
    assert [u.username for u in store.list_users()] == ["alice", "inner", "root"]
    inner = store.find_user("inner")
    assert inner is not None and inner.password == "rotated-secret"
    assert [a.subject.username for a in store.list_acls()] == ["alice"]
    assert not store.replace(master_users, master_acls, keep=("root", "inner"))
    assert len(writes) == 1, "an equal copy rewrote the file"
    reloaded = Store.open(tmp_path)
    assert reloaded.export() == store.export()
    generation = store.generation
    too_many = [*master_users, _user("bob"), _user("carol")]
    with pytest.raises(errors.AuthLimitError):
        store.replace(too_many, master_acls, keep=("root",))
    with pytest.raises(errors.AuthMetadataError):
        store.replace(master_users, [_acl("nobody", ("Topic:t", "Pub", "Allow"))])
    with pytest.raises(errors.AuthMetadataError):
        store.replace([*master_users, _user("alice", "other")], [])
    assert len(writes) == 1 and store.generation == generation


def test_a_corrupt_file_is_refused(tmp_path: pathlib.Path) -> None:
    """A file whose payload does not match its digest, or is not JSON, is refused at load."""
    store = Store.open(tmp_path)
    store.create_user(_user("alice"))
    data = store.path.read_bytes()
    store.path.write_bytes(data.replace(b"alice", b"alicf", 1))
    with pytest.raises(errors.AuthMetadataError, match="corrupt"):
        Store.open(tmp_path)
    store.path.write_bytes(data[: len(data) // 2])
    with pytest.raises(errors.AuthMetadataError, match="malformed"):
        Store.open(tmp_path)


def test_bounds(tmp_path: pathlib.Path) -> None:
    """The user table and each ACL are bounded; a full table refuses with ``AuthLimitError``."""
    store = Store.open(tmp_path, users_max=2)
    store.create_user(_user("a"))
    store.create_user(_user("b"))
    with pytest.raises(errors.AuthLimitError):
        store.create_user(_user("c"))
    with pytest.raises(errors.AuthLimitError):
        Store.open(tmp_path, users_max=1)
    entries = [(f"Topic:t{i}", "Pub", "Allow") for i in range(model.ENTRIES_PER_ACL_MAX)]
    store.put_acl(_acl("a", *entries))
    with pytest.raises(errors.AuthLimitError):
        store.put_acl(_acl("a", ("Topic:one-more", "Pub", "Allow")))
    with pytest.raises(errors.AuthLimitError):
        _user("x" * (model.USERNAME_CHARS_MAX + 1))
    for bad in ("", " ", "a,b", "a/b", "a b", "tab\t"):
        with pytest.raises(errors.AuthMetadataError):
            _user(bad)


def test_init_users_create_absent_super_users_only(tmp_path: pathlib.Path) -> None:
    """Bootstrap users are created as Super when absent and left alone when present (a later
    password in the settings does not overwrite the stored one)."""
    store = Store.open(tmp_path)
    auth = auth_settings.AuthSettings(
        authentication_enabled=True,
        init_authentication_user=auth_settings.InitUser("root", "root-secret"),
        inner_client_authentication_credentials=auth_settings.InnerCredentials(
            "inner", "inner-secret"
        ),
    )
    assert store.init_users(auth) == ["root", "inner"]
    root = store.find_user("root")
    assert root is not None and root.user_type is model.UserType.SUPER
    changed = auth_settings.AuthSettings(
        authentication_enabled=True,
        init_authentication_user=auth_settings.InitUser("root", "other-secret"),
    )
    assert Store.open(tmp_path).init_users(changed) == []
    assert Store.open(tmp_path).find_user("root") == root


def test_settings_validate_and_load_from_the_broker_toml() -> None:
    """``[auth]`` loads through the broker's settings loader and can be switched on (the gRPC
    gate enforces it); authorization without authentication and out-of-range bounds are
    refused."""
    loaded = broker_settings.from_mapping(
        {
            "store_dir": "/tmp/x",
            "auth": {
                "identity_cache_entries_max": 5,
                "init_authentication_user": {"username": "root", "password": "pw"},
            },
        }
    )
    assert loaded.auth.init_authentication_user == auth_settings.InitUser("root", "pw")
    assert loaded.auth.identity_cache_entries_max == 5
    assert broker_settings.from_mapping({"store_dir": "/x"}).auth == auth_settings.AuthSettings()
    enabled = broker_settings.from_mapping(
        {"store_dir": "/x", "auth": {"authentication_enabled": True}}
    )
    assert enabled.auth.authentication_enabled
    on = auth_settings.AuthSettings(authentication_enabled=True, authorization_enabled=True)
    assert on.authorization_enabled
    with pytest.raises(ValueError, match=r"needs auth\.authentication_enabled"):
        auth_settings.AuthSettings(authorization_enabled=True)
    with pytest.raises(ValueError, match="identity_cache_entries_max"):
        auth_settings.AuthSettings(identity_cache_entries_max=-1)
    with pytest.raises(ValueError, match="init_authentication_user"):
        auth_settings.InitUser("a/b", "pw")
    with pytest.raises(ValueError, match=r"unknown broker setting 'auth\.nope'"):
        broker_settings.from_mapping({"store_dir": "/x", "auth": {"nope": 1}})


_names = st.text("abcdefgh-_.", min_size=1, max_size=8)
_entry = st.tuples(
    st.sampled_from(["Topic", "Group", "Cluster"]).flatmap(
        lambda t: st.builds(lambda n, p: f"{t}:{n}{p}", _names, st.sampled_from(["", "*"]))
    )
    | st.just("*"),
    st.lists(st.sampled_from(list(model.Action)), min_size=1, unique=True),
    st.sampled_from(list(model.Decision)),
    st.lists(st.sampled_from(["10.0.0.0/8", "192.168.1.7", "fd00::/8"]), max_size=2, unique=True),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    users=st.dictionaries(
        _names,
        st.tuples(
            st.text(min_size=1, max_size=12).filter(str.strip),
            st.sampled_from(list(model.UserType)),
        ),
        max_size=5,
    ),
    entries=st.lists(_entry, max_size=6),
)
def test_persistence_round_trips(
    tmp_path_factory: pytest.TempPathFactory,
    users: dict[str, tuple[str, model.UserType]],
    entries: list[tuple[str, list[model.Action], model.Decision, list[str]]],
) -> None:
    """Whatever users and ACL entries are stored, reopening the directory gives them back."""
    directory = tmp_path_factory.mktemp("auth")
    store = Store.open(directory)
    for name, (secret, kind) in users.items():
        store.create_user(_user(name, secret, user_type=kind))
    for name in users:
        parsed = {
            e.resource: e
            for e in (
                model.PolicyEntry.of(r, [a.value for a in acts], d.value, ips)
                for r, acts, d, ips in entries
            )
        }
        if parsed:
            store.put_acl(
                model.Acl(
                    model.Subject(model.Username(name)),
                    (model.Policy(model.PolicyType.DEFAULT, tuple(parsed.values())),),
                )
            )
    again = Store.open(directory)
    assert {n: again.find_user(n) for n in users} == {n: store.find_user(n) for n in users}
    assert again.list_acls() == store.list_acls()


CRASH_WRITER = textwrap.dedent(
    """
    import pathlib, sys
    from ariane.security import metadata_store, model
    store = metadata_store.AuthMetadataStore.open(pathlib.Path(sys.argv[1]))
    i = 0
    while True:
        store.create_user(model.User(model.Username(f"user{i:05d}"), "pw" + "x" * 200))
        if i % 7 == 3:
            store.delete_user(f"user{i - 1:05d}")
        i += 1
    """
)


def _states_of_the_writer(count: int) -> list[set[str]]:
    """Every user set ``CRASH_WRITER`` passes through in its first ``count`` changes."""
    states: list[set[str]] = [set()]
    current: set[str] = set()
    for i in range(count):
        current = current | {f"user{i:05d}"}
        states.append(current)
        if i % 7 == 3:
            current = current - {f"user{i - 1:05d}"}
            states.append(current)
    return states


def test_sigkill_mid_write_leaves_a_loadable_file(tmp_path: pathlib.Path) -> None:
    """A writer killed with SIGKILL while it rewrites the file in a loop leaves a file that
    loads whole and holds exactly the users of one point of its sequence of changes."""
    for round_ in range(2):
        directory = tmp_path / f"auth{round_}"
        path = directory / metadata_store.FILE_NAME
        proc = subprocess.Popen([sys.executable, "-c", CRASH_WRITER, str(directory)])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # let it rewrite the file many times
                if path.exists() and path.stat().st_size > 8_000 * (round_ + 1):
                    break
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL  # killed, not crashed on its own
        names = {u.username for u in Store.open(directory).list_users()}
        assert len(names) >= 20
        assert names in _states_of_the_writer(len(names) * 2 + 10)
