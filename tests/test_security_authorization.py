"""ACL 2.0 authorization: resource strings, entry matching and RocketMQ's decision rules.

The precedence is the one RocketMQ adopted after 5.3.3 (apache/rocketmq #9540,
``AclAuthorizationHandler.comparePolicyEntries`` at HEAD and its ``evaluate9`` test): the most
specific matching entry decides, and Ariane lets Deny win a tie.
"""

from __future__ import annotations

import pytest

from ariane.security import authorization, errors, model

A = model.Action
RT = model.ResourceType
ZS = authorization.AuthzStatus


class _Directory:
    """Users and ACLs held in dicts."""

    def __init__(self, users: list[model.User], acls: list[model.Acl]) -> None:
        self.users: dict[str, model.User] = {u.username: u for u in users}
        self.acls = {a.subject.username: a for a in acls}

    def find_user(self, username: str) -> model.User | None:
        return self.users.get(username)

    def find_acl(self, subject: model.Subject) -> model.Acl | None:
        return self.acls.get(subject.username)


def _user(name: str, **kw: object) -> model.User:
    return model.User(model.Username(name), f"{name}-secret", **kw)  # type: ignore[arg-type]


def _subject(name: str) -> model.Subject:
    return model.Subject(model.Username(name))


def _acl(
    name: str, *entries: model.PolicyEntry, default: tuple[model.PolicyEntry, ...] = ()
) -> model.Acl:
    policies = [model.Policy(model.PolicyType.CUSTOM, entries)] if entries else []
    if default:
        policies.append(model.Policy(model.PolicyType.DEFAULT, default))
    return model.Acl(_subject(name), tuple(policies))


def _entry(resource: str, actions: str, decision: str, *ips: str) -> model.PolicyEntry:
    return model.PolicyEntry.of(resource, actions.split(","), decision, ips)


def _pub(topic: str) -> authorization.Permission:
    return authorization.Permission(model.Resource.topic(topic), frozenset({A.PUB}))


@pytest.mark.parametrize(
    ("key", "resource_type", "name", "pattern"),
    [
        ("*", RT.ANY, "", model.ResourcePattern.ANY),
        ("Topic:*", RT.TOPIC, "", model.ResourcePattern.ANY),
        ("topic:order-*", RT.TOPIC, "order-", model.ResourcePattern.PREFIXED),
        ("Topic:orders", RT.TOPIC, "orders", model.ResourcePattern.LITERAL),
        ("Topic:a*b", RT.TOPIC, "a*b", model.ResourcePattern.LITERAL),
        ("GROUP:g", RT.GROUP, "g", model.ResourcePattern.LITERAL),
        ("Cluster:DefaultCluster", RT.CLUSTER, "DefaultCluster", model.ResourcePattern.LITERAL),
        ("Namespace:ns", RT.NAMESPACE, "ns", model.ResourcePattern.LITERAL),
    ],
)
def test_resource_strings_parse_as_rocketmq_does(
    key: str, resource_type: model.ResourceType, name: str, pattern: model.ResourcePattern
) -> None:
    """``Resource.of(String)``: ``*``, ``Type:*``, a trailing-``*`` prefix, or a literal."""
    resource = model.Resource.parse(key)
    assert (resource.resource_type, resource.name, resource.pattern) == (
        resource_type,
        name,
        pattern,
    )
    assert model.Resource.parse(resource.key) == resource


@pytest.mark.parametrize(
    "key", ["", "Foo:x", "Topic:", "Topic", "Any:x", ":x", "Topic:" + "x" * 300]
)
def test_bad_resource_strings_are_refused(key: str) -> None:
    """Unknown types, empty names and over-long names are refused ("The resource is null.")."""
    with pytest.raises(errors.AuthMetadataError):
        model.Resource.parse(key)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("Topic:t", ["Any"], "Allow"), "The actions can not be Any."),
        (("Topic:t", [], "Allow"), "The actions is empty."),
        (("Topic:t", ["Fly"], "Allow"), "illegal"),
        (("Topic:t", ["Pub"], "Maybe"), "illegal"),
        (("Topic:t", ["Pub"], "Allow", ["10.0.0.300"]), "The source ip is invalid."),
        (("Topic:t", ["Pub"], "Allow", [" "]), "The source ip is empty."),
        (("Topic:t", ["Pub"], "Allow", ["10.0.0.1"] * 65), "More than 64"),
    ],
)
def test_bad_entries_are_refused_with_rocketmqs_text(
    args: tuple[object, ...], message: str
) -> None:
    """Entries RocketMQ's manager refuses (and over-bound ones) never get built."""
    with pytest.raises(errors.AuthMetadataError, match=message):
        model.PolicyEntry.of(*args)  # type: ignore[arg-type]


def test_group_resources_drop_the_retry_prefix() -> None:
    """``Resource.ofGroup("%RETRY%G")`` is ``Group:G``; a DLQ name is kept as is."""
    assert model.Resource.group("%RETRY%G").key == "Group:G"
    assert model.Resource.group("%DLQ%G").key == "Group:%DLQ%G"


def test_evaluate9_most_specific_entry_decides() -> None:
    """RocketMQ HEAD's ``AuthorizationEvaluatorTest.evaluate9``: with ``*``, ``Topic:*`` and
    ``Topic:test*`` allowed and ``Topic:test_*`` and ``Topic:test_001`` denied, test_001 and
    test_002 are denied, test and other are allowed (5.3.3 allowed test_002: shorter prefix)."""
    acl = _acl(
        "alice",
        _entry("*", "Pub", "Allow"),
        _entry("Topic:*", "Pub", "Allow"),
        _entry("Topic:test*", "Pub", "Allow"),
        _entry("Topic:test_*", "Pub", "Deny"),
        _entry("Topic:test_001", "Pub", "Deny"),
    )
    directory = _Directory([_user("alice")], [acl])
    outcome = {
        topic: authorization.authorize(directory, _subject("alice"), [_pub(topic)], "10.0.0.7")
        for topic in ("test_001", "test_002", "test", "other")
    }
    assert {t: r.status for t, r in outcome.items()} == {
        "test_001": ZS.DENIED,
        "test_002": ZS.DENIED,
        "test": ZS.ALLOWED,
        "other": ZS.ALLOWED,
    }
    assert outcome["test_002"].entry is not None
    assert outcome["test_002"].entry.resource.key == "Topic:test_*"
    assert outcome["test_001"].message == (
        "User:alice has no permission to access Topic:test_001 from 10.0.0.7, the decision is deny."
    )


@pytest.mark.parametrize(
    ("entries", "topic", "status"),
    [
        # literal beats prefix, whatever the storage order (5.3.3 depended on it)
        (("Topic:orders|Allow", "Topic:ord*|Deny"), "orders", ZS.ALLOWED),
        (("Topic:ord*|Deny", "Topic:orders|Allow"), "orders", ZS.ALLOWED),
        (("Topic:orders|Deny", "Topic:ord*|Allow"), "orders", ZS.DENIED),
        # longer prefix beats shorter
        (("Topic:o*|Deny", "Topic:ord*|Allow"), "orders", ZS.ALLOWED),
        (("Topic:ord*|Allow", "Topic:o*|Deny"), "ox", ZS.DENIED),
        # Type:* beats *, prefix beats Type:*
        (("*|Deny", "Topic:*|Allow"), "x", ZS.ALLOWED),
        (("Topic:*|Deny", "Topic:x*|Allow"), "xy", ZS.ALLOWED),
        # an entry on another type never matches; nothing matching is a denial
        (("Group:*|Allow",), "x", ZS.NO_MATCH),
        (("Topic:y|Allow",), "x", ZS.NO_MATCH),
    ],
)
def test_precedence_rows(
    entries: tuple[str, ...], topic: str, status: authorization.AuthzStatus
) -> None:
    """Row by row, the most specific matching entry decides; no match is a denial."""
    parsed = [_entry(e.split("|")[0], "Pub", e.split("|")[1]) for e in entries]
    directory = _Directory([_user("alice")], [_acl("alice", *parsed)])
    result = authorization.authorize(directory, _subject("alice"), [_pub(topic)], "10.0.0.7")
    assert result.status is status
    if status is ZS.NO_MATCH:
        assert result.message.endswith("no matched policies.")


def test_deny_wins_a_tie_of_equal_specificity() -> None:
    """Two candidates of equal specificity (reachable only through ``deciding_entry``'s sort
    key, since a policy holds one entry per resource): Deny sorts first."""
    allow = _entry("Topic:t", "Pub", "Allow")
    deny = _entry("Topic:t", "Pub", "Deny")
    ranked = sorted([allow, deny], key=authorization._rank)
    assert ranked[0] is deny


def test_custom_entries_hide_default_ones_and_default_applies_alone() -> None:
    """DEFAULT entries are used only when no CUSTOM entry matches (``matchPolicyEntries``)."""
    acl = _acl(
        "alice",
        _entry("Topic:a", "Pub", "Allow"),
        default=(_entry("Topic:*", "Pub", "Deny"), _entry("Topic:b", "Pub", "Allow")),
    )
    directory = _Directory([_user("alice")], [acl])

    def decide(topic: str) -> authorization.AuthzStatus:
        return authorization.authorize(directory, _subject("alice"), [_pub(topic)], None).status

    assert decide("a") is ZS.ALLOWED  # custom literal; default Topic:* deny ignored
    assert decide("b") is ZS.ALLOWED  # no custom match: default literal allow
    assert decide("c") is ZS.DENIED  # no custom match: default Topic:* deny


def test_actions_all_any_of_and_every_permission() -> None:
    """``All`` grants any action; one granted action of a permission suffices; every
    permission of a request must pass, and the first refused one is named."""
    acl = _acl("alice", _entry("Topic:t", "All", "Allow"), _entry("Group:g", "Get", "Allow"))
    directory = _Directory([_user("alice")], [acl])
    sub_or_get = frozenset({A.SUB, A.GET})
    group_sub = authorization.Permission(model.Resource.group("g"), frozenset({A.SUB}))
    group_get = authorization.Permission(model.Resource.group("g"), sub_or_get)
    topic_any = authorization.Permission(model.Resource.topic("t"), frozenset({A.DELETE}))
    alice = _subject("alice")
    assert authorization.authorize(directory, alice, [topic_any, group_get], None).allowed
    refused = authorization.authorize(directory, alice, [topic_any, group_sub], None)
    assert (refused.status, refused.permission) == (ZS.NO_MATCH, group_sub)
    assert authorization.authorize(directory, alice, [], None).allowed  # nothing to check


@pytest.mark.parametrize(
    ("source_ips", "client", "allowed"),
    [
        ((), None, True),
        ((), "10.0.0.7", True),
        (("10.0.0.0/8",), "10.0.0.7", True),
        (("10.0.0.0/8",), "::ffff:10.0.0.7", True),
        (("10.0.0.7",), "10.0.0.7", True),
        (("10.0.0.0/8",), "192.168.0.1", False),
        (("10.0.0.0/8",), None, False),
        (("10.0.0.0/8",), "not-an-ip", False),
        (("fd00::/8", "192.168.0.0/16"), "fd00::1", True),
        (("fd00::/8",), "10.0.0.7", False),
    ],
)
def test_source_ip_ranges(source_ips: tuple[str, ...], client: str | None, allowed: bool) -> None:
    """An entry with source IPs applies only to clients inside one of them (``Environment``);
    an unknown client address matches only entries without source IPs."""
    acl = _acl("alice", _entry("Topic:t", "Pub", "Allow", *source_ips))
    directory = _Directory([_user("alice")], [acl])
    result = authorization.authorize(directory, _subject("alice"), [_pub("t")], client)
    assert result.allowed is allowed


def test_subjects_super_users_and_default_deny() -> None:
    """Super users pass without an ACL; unknown, disabled or ACL-less users and a missing
    subject are refused, each with its status."""
    directory = _Directory(
        [
            _user("root", user_type=model.UserType.SUPER),
            _user("alice"),
            _user("bob", user_status=model.UserStatus.DISABLE),
        ],
        [],
    )
    need = [_pub("t")]
    assert authorization.authorize(directory, _subject("root"), need, None).allowed
    assert authorization.authorize(directory, None, need, None).status is ZS.NO_SUBJECT
    assert (
        authorization.authorize(directory, _subject("carol"), need, None).status is ZS.UNKNOWN_USER
    )
    assert authorization.authorize(directory, _subject("bob"), need, None).status is ZS.DISABLED
    denied = authorization.authorize(directory, _subject("alice"), need, "10.1.1.1")
    assert denied.status is ZS.NO_MATCH
    assert denied.message == (
        "User:alice has no permission to access Topic:t from 10.1.1.1, no matched policies."
    )


def test_acl_upserts_and_deletes_per_resource() -> None:
    """Merging replaces one resource's entry and keeps the others; deleting one resource's
    entry keeps the rest; deleting the last leaves nothing."""
    acl = _acl("alice", _entry("Topic:a", "Pub", "Allow"), _entry("Topic:b", "Sub", "Allow"))
    merged = acl.merged(
        _acl("alice", _entry("Topic:a", "Sub", "Deny"), _entry("Topic:c", "Pub", "Allow"))
    )
    custom = merged.policy(model.PolicyType.CUSTOM)
    assert custom is not None
    assert {e.resource.key: (e.actions, e.decision) for e in custom.entries} == {
        "Topic:a": (frozenset({A.SUB}), model.Decision.DENY),
        "Topic:b": (frozenset({A.SUB}), model.Decision.ALLOW),
        "Topic:c": (frozenset({A.PUB}), model.Decision.ALLOW),
    }
    one = merged.without(model.PolicyType.CUSTOM, model.Resource.parse("Topic:a"))
    assert one is not None and len(one.policies[0].entries) == 2
    single = _acl("alice", _entry("Topic:a", "Pub", "Allow"))
    assert single.without(model.PolicyType.CUSTOM, model.Resource.parse("Topic:a")) is None
    assert model.acl_from_info(merged.to_info()) == merged
