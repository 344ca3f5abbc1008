"""The ACL 2.0 admin codes 3001-3010 (``mqadmin createUser`` ... ``listAcl``) over the broker's
``AuthMetadataStore``.

Mirrors RocketMQ 5.3.3's ``AdminBrokerProcessor`` auth handlers (security.md §6.1): headers
``username`` (3001-3004), ``filter`` (3005), ``subject`` (3006-3009; 3008 also ``policyType``
and ``resource``), ``subjectFilter``/``resourceFilter`` (3010); bodies ``UserInfo`` and
``AclInfo`` JSON (fastjson names, enum names). Rules kept:

* a blank username answers 29 "The username is blank"; a user or ACL the store refuses
  answers 16 with the store's text ("The user is existed", "The user is not exist",
  "The subject of User:x is not exist.", "The acl is not exist.", ...);
* only a Super caller creates a Super user or makes a user Super (1 SYSTEM_ERROR "The super
  user can only be create by super user"), and only a Super caller updates or deletes an
  existing Super user (16). The caller is the request's ``AccessKey``, which the gate
  (``remoting.security_gate``) has authenticated; with authentication off nobody is checked
  (RocketMQ: no ``AccessKey``, no check) and ``AccessKey`` is ignored (a stock mqadmin signs
  every request as ``rocketmq2``);
* 3003 of an absent user succeeds and deletes the user's ACL with it; 3006 and 3007 both
  merge the entries into the subject's ACL per resource; a write that cannot be persisted
  answers 1 "An system error occurred, please try again later.".

Where Ariane does better: 3004 and 3005 never return the password (RocketMQ returns it in
clear, weakness 6); a malformed body answers 29 instead of a decoding stack trace.

Invariants: every reply is built here and no exception leaves a handler; no remark or body
holds a secret.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ariane.broker.remoting import replies
from ariane.remoting import codes, command, fastjson
from ariane.security import errors, metadata_store, model

_log = logging.getLogger(__name__)

RC = codes.ResponseCode
RQ = codes.RequestCode
Reply = command.RemotingCommand

SYSTEM_ERROR_REMARK = "An system error occurred, please try again later."
"""RocketMQ's remark when an auth admin write fails for another reason than a rule."""


class _RefusedError(Exception):
    """A request answered with ``code`` and ``remark`` (internal control flow)."""

    def __init__(self, code: RC, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class AuthAdminHandler:
    """Serves 3001-3010 from the metadata store.

    Args:
        store: the broker's users and ACLs.
        authentication_enabled: whether the ``AccessKey`` of a request is an authenticated
            caller (else the Super-only rules are not checked).
    """

    def __init__(
        self, store: metadata_store.AuthMetadataStore, *, authentication_enabled: bool
    ) -> None:
        self._store = store
        self._authenticated = authentication_enabled

    def table(self) -> dict[int, replies.RequestHandler]:
        """Request code -> handler, for ``RemotingService``."""
        handlers = {
            RQ.AUTH_CREATE_USER: self._create_user,
            RQ.AUTH_UPDATE_USER: self._update_user,
            RQ.AUTH_DELETE_USER: self._delete_user,
            RQ.AUTH_GET_USER: self._get_user,
            RQ.AUTH_LIST_USER: self._list_users,
            RQ.AUTH_CREATE_ACL: self._put_acl,
            RQ.AUTH_UPDATE_ACL: self._put_acl,
            RQ.AUTH_DELETE_ACL: self._delete_acl,
            RQ.AUTH_GET_ACL: self._get_acl,
            RQ.AUTH_LIST_ACL: self._list_acls,
        }
        return {code: self._answering(handler) for code, handler in handlers.items()}

    def _answering(self, handler: Callable[[Reply], bytes]) -> replies.RequestHandler:
        async def handle(request: Reply) -> Reply:
            try:
                body: bytes = handler(request)
            except _RefusedError as refused:
                return replies.failed(request, refused.code, refused.remark)
            except errors.AuthMetadataError as exc:
                return replies.failed(request, RC.NO_PERMISSION, exc.message)
            except OSError:
                _log.exception("auth admin code %d could not be persisted", request.code)
                return replies.failed(request, RC.SYSTEM_ERROR, SYSTEM_ERROR_REMARK)
            return replies.ok(request, body=body)

        return handle

    # Users.

    def _caller_is_super(self, request: Reply) -> bool:
        """Whether the Super-only rules let the caller through (``!isNotSuperUserLogin``)."""
        if not self._authenticated:
            return True
        caller = self._store.find_user(request.ext_fields.get("AccessKey", ""))
        return caller is not None and caller.user_type is model.UserType.SUPER

    def _create_user(self, request: Reply) -> bytes:
        """3001: create the ``UserInfo`` of the body under the header's ``username``."""
        username = _username(request)
        info = {**_object(request.body), "username": username}
        info["userType"] = _known_type(info.get("userType"))
        user = model.user_from_info(info)
        if user.user_type is model.UserType.SUPER and not self._caller_is_super(request):
            raise _RefusedError(RC.SYSTEM_ERROR, "The super user can only be create by super user")
        self._store.create_user(user)
        return b""

    def _update_user(self, request: Reply) -> bytes:
        """3002: apply the body's non-blank password, known type and status."""
        username = _username(request)
        info = _object(request.body)
        user_type = _enum(model.UserType, _known_type(info.get("userType")))
        user_status = _enum(model.UserStatus, info.get("userStatus"))
        password = info.get("password")
        superior = self._caller_is_super(request)
        if user_type is model.UserType.SUPER and not superior:
            raise _RefusedError(RC.SYSTEM_ERROR, "The super user can only be update by super user")
        old = self._store.find_user(username)
        if old is None:
            raise _RefusedError(RC.NO_PERMISSION, "The user is not exist")
        if old.user_type is model.UserType.SUPER and not superior:
            raise _RefusedError(RC.NO_PERMISSION, "The super user can only be update by super user")
        self._store.update_user(
            username,
            password=password if isinstance(password, str) else None,
            user_type=user_type,
            user_status=user_status,
        )
        return b""

    def _delete_user(self, request: Reply) -> bytes:
        """3003: delete the user and its ACL; an absent user is a success."""
        username = request.ext_fields.get("username", "")
        old = self._store.find_user(username)
        if old is None:
            return b""
        if old.user_type is model.UserType.SUPER and not self._caller_is_super(request):
            raise _RefusedError(RC.NO_PERMISSION, "The super user can only be update by super user")
        self._store.delete_user(username)
        return b""

    def _get_user(self, request: Reply) -> bytes:
        """3004: the user without its password, or an empty body."""
        view = self._store.get_user(_username(request))
        return fastjson.dumps(view.to_info()) if view is not None else b""

    def _list_users(self, request: Reply) -> bytes:
        """3005: the users whose name holds ``filter``, without passwords (empty: no body)."""
        views = self._store.list_users(request.ext_fields.get("filter", ""))
        return fastjson.dumps([v.to_info() for v in views]) if views else b""

    # ACLs.

    def _put_acl(self, request: Reply) -> bytes:
        """3006/3007: merge the body's ``AclInfo`` into the subject's ACL."""
        info = dict(_object(request.body))
        if not isinstance(info.get("policies"), list) or not info["policies"]:
            raise _RefusedError(RC.INVALID_PARAMETER, "The body of acl is null")
        if not info.get("subject"):
            info["subject"] = request.ext_fields.get("subject", "")
        self._store.put_acl(model.acl_from_info(info))
        return b""

    def _delete_acl(self, request: Reply) -> bytes:
        """3008: drop one resource's entry (of ``policyType``, default Custom) or the ACL."""
        ext = request.ext_fields
        subject = model.Subject.parse(ext.get("subject", ""))
        policy_type = _enum(model.PolicyType, ext.get("policyType")) or model.PolicyType.CUSTOM
        resource = model.Resource.parse(ext["resource"]) if ext.get("resource") else None
        self._store.delete_acl(subject, policy_type=policy_type, resource=resource)
        return b""

    def _get_acl(self, request: Reply) -> bytes:
        """3009: the subject's ACL, an empty body, or 16 for an unknown user."""
        subject = model.Subject.parse(request.ext_fields.get("subject", ""))
        if self._store.find_user(subject.username) is None:
            raise _RefusedError(RC.NO_PERMISSION, "The subject is not exist.")
        acl = self._store.get_acl(subject)
        return fastjson.dumps(acl.to_info()) if acl is not None else b""

    def _list_acls(self, request: Reply) -> bytes:
        """3010: the ACLs matching ``subjectFilter`` and ``resourceFilter`` (empty: no body)."""
        ext = request.ext_fields
        acls = self._store.list_acls(ext.get("subjectFilter", ""), ext.get("resourceFilter", ""))
        return fastjson.dumps([a.to_info() for a in acls]) if acls else b""


def _username(request: Reply) -> str:
    username = request.ext_fields.get("username", "")
    if not username.strip():
        raise _RefusedError(RC.INVALID_PARAMETER, "The username is blank")
    return username


def _object(body: bytes) -> Mapping[str, Any]:
    """The body as a JSON object ({} when empty)."""
    if not body:
        return {}
    try:
        data = fastjson.loads(body)
    except fastjson.JsonError as exc:
        raise _RefusedError(RC.INVALID_PARAMETER, f"The body is no JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise _RefusedError(RC.INVALID_PARAMETER, "The body is no JSON object")
    return data


def _known_type(value: object) -> str | None:
    """RocketMQ's ``UserType.getByName``: an unknown name is null (``-t Admin`` → Normal)."""
    known = isinstance(value, str) and _enum(model.UserType, value) is not None
    return value if known and isinstance(value, str) else None


def _enum(kind: Any, value: object) -> Any:
    """The member of a ``model`` enum named ``value`` (any case), or ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return kind.of(value)
    except errors.AuthMetadataError:
        return None
