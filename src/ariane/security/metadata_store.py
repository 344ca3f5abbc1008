"""Users and ACLs of one server, in memory and in one atomic metadata file.

RocketMQ keeps them in two RocksDB instances (``config/users``, ``config/acls``) with clear
passwords (security.md §7, weakness 6). Ariane keeps both in one JSON file, ``auth.json``, in a
directory the caller gives (created mode 0700)::

    {"format": 1, "sha256": "<hex of the canonical payload>",
     "payload": {"users": [UserInfo with password, ...], "acls": [AclInfo, ...]}}

One file means one atomic write per change: deleting a user and its ACL (AUTH_DELETE_USER) can
never be half done. The password stays in the file because both signature schemes need the raw
secret as the HMAC key; the file is mode 0600, and the payload digest catches a corrupted file at
load (refused, never half-read).

Invariants:

* the file is replaced atomically (temporary file mode 0600 in the same directory, fsync,
  rename over ``auth.json``, fsync of the directory): a crash, SIGKILL included, leaves the old
  or the new content, and a leftover temporary file is ignored;
* memory changes only after the file write succeeded, so a failed write changes nothing;
* every table is bounded (``users_max``; ACLs exist only for existing users, each bounded by
  ``model.ENTRIES_PER_ACL_MAX``);
* nothing logged or returned by a get/list view holds a password (``UserView``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
from collections.abc import Callable, Collection, Iterable
from typing import Any

from ariane.security import errors, model, settings

_log = logging.getLogger(__name__)

FILE_NAME = "auth.json"
"""The metadata file's name in its directory."""

FORMAT_VERSION = 1
"""The file layout version written and accepted."""

METADATA_FILE_BYTES_MAX = 64 * 1024 * 1024
"""Largest metadata file read or written, in bytes (10 000 users with 1 024-entry ACLs fit)."""

Writer = Callable[[pathlib.Path, bytes], None]
"""Replaces a file's content atomically (the seam a test uses to inject failures)."""


def write_atomically(path: pathlib.Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temporary file (mode 0600), fsync, rename, fsync dir.

    Raises:
        OSError: the file system refused a step; ``path`` then still has its old content.
    """
    temp = path.with_name(f".{path.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a leftover temporary file may have had another mode
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def encode(users: Iterable[model.User], acls: Iterable[model.Acl]) -> bytes:
    """The file content for these users and ACLs (see the module docstring)."""
    payload = {
        "users": [model.user_to_info(u) for u in users],
        "acls": [a.to_info() for a in acls],
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    document = {"format": FORMAT_VERSION, "sha256": digest, "payload": payload}
    return json.dumps(document, sort_keys=True, indent=1).encode("utf-8")


def decode(data: bytes) -> tuple[list[model.User], list[model.Acl]]:
    """The users and ACLs of a file's content.

    Raises:
        errors.AuthMetadataError: not this format, a digest mismatch, or an invalid user/ACL.
    """
    try:
        document = json.loads(data)
        payload = document["payload"]
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        version, digest = document["format"], document["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.AuthMetadataError(f"The auth metadata is malformed: {exc!r}") from None
    if version != FORMAT_VERSION:
        raise errors.AuthMetadataError(f"The auth metadata format {version!r} is unknown.")
    if hashlib.sha256(canonical.encode("utf-8")).hexdigest() != digest:
        raise errors.AuthMetadataError("The auth metadata is corrupt (digest mismatch).")
    try:  # the digest matched: what fails now was written by a buggy or foreign writer
        users = [model.user_from_info(info) for info in payload["users"]]
        acls = [model.acl_from_info(info) for info in payload["acls"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise errors.AuthMetadataError(f"The auth metadata is malformed: {exc!r}") from None
    return users, acls


class AuthMetadataStore:
    """Users and ACLs of one server (RocketMQ ``LocalAuthenticationMetadataProvider`` +
    ``LocalAuthorizationMetadataProvider`` + the rules of their managers).

    Implements ``authentication.UserDirectory`` and ``authorization.AclDirectory``. Not
    thread-safe: one owner (the server's event loop) calls it.

    Args:
        directory: where ``auth.json`` lives (created if missing).
        users_max: most users held, a count.
        writer: the atomic file writer (tests inject failures).
    """

    def __init__(
        self,
        directory: pathlib.Path,
        *,
        users_max: int = model.USERS_MAX,
        writer: Writer = write_atomically,
    ) -> None:
        assert 1 <= users_max <= model.USERS_MAX, users_max
        self.path = directory / FILE_NAME
        self._users_max = users_max
        self._writer = writer
        self._users: dict[str, model.User] = {}
        self._acls: dict[str, model.Acl] = {}
        self.generation = 0
        """Bumped by every change (an ``IdentityCache`` is cleared when it moves)."""

    @classmethod
    def open(
        cls,
        directory: pathlib.Path,
        *,
        users_max: int = model.USERS_MAX,
        writer: Writer = write_atomically,
    ) -> AuthMetadataStore:
        """The store of ``directory``, loaded from its file if there is one.

        Raises:
            errors.AuthMetadataError: the file is corrupt, too large, or holds more users than
                ``users_max`` or an ACL of an unknown user.
            OSError: the directory or file cannot be created or read.
        """
        store = cls(directory, users_max=users_max, writer=writer)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if store.path.exists():
            if store.path.stat().st_size > METADATA_FILE_BYTES_MAX:
                raise errors.AuthMetadataError(f"{store.path} exceeds {METADATA_FILE_BYTES_MAX}")
            users, acls = decode(store.path.read_bytes())
            if len(users) > users_max:
                raise errors.AuthLimitError(f"{store.path} holds more than {users_max} users")
            store._users = {u.username: u for u in users}
            store._acls = {a.subject.username: a for a in acls}
            if set(store._acls) - set(store._users):
                raise errors.AuthMetadataError(f"{store.path} holds an ACL of an unknown user")
        _log.info("auth metadata: %d users, %d ACLs", len(store._users), len(store._acls))
        return store

    def _commit(self, users: dict[str, model.User], acls: dict[str, model.Acl]) -> None:
        """Write the new tables, then adopt them (a failed write changes nothing)."""
        data = encode(users.values(), acls.values())
        if len(data) > METADATA_FILE_BYTES_MAX:
            raise errors.AuthLimitError(f"The auth metadata would exceed {METADATA_FILE_BYTES_MAX}")
        self._writer(self.path, data)
        self._users, self._acls = users, acls
        self.generation += 1

    # Lookups for authentication and authorization (secrets included: never show these).

    def find_user(self, username: str) -> model.User | None:
        """The user named ``username`` with its secret, or ``None``."""
        return self._users.get(username)

    def find_acl(self, subject: model.Subject) -> model.Acl | None:
        """The subject's ACL, or ``None``."""
        return self._acls.get(subject.username)

    # Views for administration (AUTH_GET_USER, AUTH_LIST_USER, AUTH_GET_ACL, AUTH_LIST_ACL).

    def get_user(self, username: str) -> model.UserView | None:
        """The user without its secret, or ``None``."""
        user = self._users.get(username)
        return user.view() if user is not None else None

    def list_users(self, name_filter: str = "") -> list[model.UserView]:
        """Users whose name contains ``name_filter``, by name, without secrets."""
        return [u.view() for n, u in sorted(self._users.items()) if name_filter in n]

    def get_acl(self, subject: model.Subject) -> model.Acl | None:
        """The subject's ACL (ACLs hold no secret), or ``None``."""
        return self._acls.get(subject.username)

    def list_acls(self, subject_filter: str = "", resource_filter: str = "") -> list[model.Acl]:
        """ACLs whose subject key contains ``subject_filter`` and that hold an entry whose
        resource key contains ``resource_filter`` (RocketMQ ``listAcl``), by subject."""
        return [
            acl
            for _, acl in sorted(self._acls.items())
            if subject_filter in acl.subject.key
            and any(resource_filter in e.resource.key for p in acl.policies for e in p.entries)
        ]

    # Changes (AUTH_CREATE_USER ... AUTH_DELETE_ACL), each one atomic file write.

    def create_user(self, user: model.User) -> None:
        """Add a user (``createUser``).

        Raises:
            errors.AuthMetadataError: "The user is existed".
            errors.AuthLimitError: already ``users_max`` users.
            OSError: the write failed (nothing changed).
        """
        if user.username in self._users:
            raise errors.AuthMetadataError("The user is existed")
        if len(self._users) >= self._users_max:
            raise errors.AuthLimitError(f"The users are already {self._users_max}")
        self._commit({**self._users, user.username: user}, self._acls)
        _log.info("auth: created %s user %s", user.user_type.value, user.username)

    def update_user(
        self,
        username: str,
        *,
        password: str | None = None,
        user_type: model.UserType | None = None,
        user_status: model.UserStatus | None = None,
    ) -> model.UserView:
        """Change a user's given fields; blank/``None`` ones are kept (``updateUser``).

        Raises:
            errors.AuthMetadataError: "The user is not exist", or an invalid password.
            OSError: the write failed (nothing changed).
        """
        old = self._users.get(username)
        if old is None:
            raise errors.AuthMetadataError("The user is not exist")
        new = model.User(
            old.username,
            password if password and password.strip() else old.password,
            user_type or old.user_type,
            user_status or old.user_status,
        )
        self._commit({**self._users, username: new}, self._acls)
        _log.info("auth: updated user %s (%s)", username, new.view())
        return new.view()

    def delete_user(self, username: str) -> bool:
        """Remove a user and its ACL (``deleteUser``); ``False`` if it did not exist, which
        RocketMQ answers as a success too.

        Raises:
            OSError: the write failed (nothing changed).
        """
        if username not in self._users:
            return False
        users = {n: u for n, u in self._users.items() if n != username}
        acls = {n: a for n, a in self._acls.items() if n != username}
        self._commit(users, acls)
        _log.info("auth: deleted user %s and its ACL", username)
        return True

    def put_acl(self, acl: model.Acl) -> model.Acl:
        """Upsert ``acl``'s entries into the subject's ACL, per policy type and resource
        (AUTH_CREATE_ACL and AUTH_UPDATE_ACL both do this); returns the ACL now stored.

        Raises:
            errors.AuthMetadataError: "The subject of User:x is not exist." (no such user).
            errors.AuthLimitError: the merged ACL would pass ``model.ENTRIES_PER_ACL_MAX``.
            OSError: the write failed (nothing changed).
        """
        name = acl.subject.username
        if name not in self._users:
            raise errors.AuthMetadataError(f"The subject of {acl.subject.key} is not exist.")
        old = self._acls.get(name)
        new = old.merged(acl) if old is not None else acl
        self._commit(self._users, {**self._acls, name: new})
        _log.info("auth: ACL of %s now has %d policies", acl.subject.key, len(new.policies))
        return new

    def delete_acl(
        self,
        subject: model.Subject,
        *,
        policy_type: model.PolicyType = model.PolicyType.CUSTOM,
        resource: model.Resource | None = None,
    ) -> None:
        """Drop one resource's entry of ``policy_type``, or the whole ACL when ``resource`` is
        ``None`` (AUTH_DELETE_ACL); an emptied policy or ACL goes too.

        Raises:
            errors.AuthMetadataError: "The acl is not exist."
            OSError: the write failed (nothing changed).
        """
        old = self._acls.get(subject.username)
        if old is None:
            raise errors.AuthMetadataError("The acl is not exist.")
        new = old.without(policy_type, resource)
        acls = {n: a for n, a in self._acls.items() if n != subject.username}
        if new is not None:
            acls[subject.username] = new
        self._commit(self._users, acls)
        _log.info("auth: ACL of %s: removed %s", subject.key, resource.key if resource else "all")

    def init_users(self, auth: settings.AuthSettings) -> list[model.Username]:
        """Create the bootstrap Super users of ``auth`` that are absent (RocketMQ
        ``AuthenticationMetadataManagerImpl.initUser``: present users are left as they are,
        password included); returns the names created.

        Raises:
            errors.AuthLimitError: the store is full.
            OSError: the write failed.
        """
        wanted: list[tuple[str, str]] = []
        if auth.init_authentication_user is not None:
            init = auth.init_authentication_user
            wanted.append((init.username, init.password))
        if auth.inner_client_authentication_credentials is not None:
            inner = auth.inner_client_authentication_credentials
            wanted.append((inner.access_key, inner.secret_key))
        created: list[model.Username] = []
        for name, secret in wanted:
            if name in self._users:
                continue
            self.create_user(model.User(model.check_username(name), secret, model.UserType.SUPER))
            created.append(model.Username(name))
        return created

    def export(self) -> tuple[list[model.User], list[model.Acl]]:
        """Every user, secret included, by name, and every ACL, by subject: what a slave copies
        (``replace``). Never show these; only the inner-only export RPC sends them."""
        return [u for _, u in sorted(self._users.items())], [
            a for _, a in sorted(self._acls.items())
        ]

    def replace(
        self,
        users: Iterable[model.User],
        acls: Iterable[model.Acl],
        *,
        keep: Collection[str] = (),
    ) -> bool:
        """Hold exactly ``users`` and ``acls`` (a slave adopting its master's), plus this
        store's own users named in ``keep`` that ``users`` lacks, with their ACLs (the
        bootstrap users of this server's ``[auth]``); one atomic write, none when nothing
        differs. Returns whether anything changed.

        Raises:
            errors.AuthMetadataError: two users or ACLs of one name, or an ACL of a user absent
                from the result (nothing changed).
            errors.AuthLimitError: more than ``users_max`` users (nothing changed).
            OSError: the write failed (nothing changed).
        """
        user_list, acl_list = list(users), list(acls)
        wanted_users: dict[str, model.User] = {u.username: u for u in user_list}
        wanted_acls: dict[str, model.Acl] = {a.subject.username: a for a in acl_list}
        if len(wanted_users) != len(user_list) or len(wanted_acls) != len(acl_list):
            raise errors.AuthMetadataError("The copy holds two users or acls of one name.")
        for name in keep:
            if name not in wanted_users and name in self._users:
                wanted_users[name] = self._users[name]
                if name in self._acls:
                    wanted_acls.setdefault(name, self._acls[name])
        if len(wanted_users) > self._users_max:
            raise errors.AuthLimitError(f"The users would be more than {self._users_max}")
        if set(wanted_acls) - set(wanted_users):
            raise errors.AuthMetadataError("An acl's subject is not exist.")
        if wanted_users == self._users and wanted_acls == self._acls:
            return False
        self._commit(wanted_users, wanted_acls)
        _log.info(
            "auth: replaced by a copy: %d users, %d ACLs", len(wanted_users), len(wanted_acls)
        )
        return True

    def snapshot(self) -> dict[str, Any]:
        """Counts for logs and metrics (no names, no secrets)."""
        return {"users": len(self._users), "acls": len(self._acls), "generation": self.generation}
