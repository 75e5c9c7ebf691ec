"""IAM policies: the v1 Policy shape over RoleBinding rows, for projects, jobs and models.

A resource's policy is the set of bindings on that resource itself (a job's policy does not
repeat the project's bindings, as in the original). ``bindings`` are ``{role, members}`` with
members ``user:USERNAME`` (``user:EMAIL`` is accepted on input); the etag is a hash of the
bindings (and, for a project, its audit configs). A resource without bindings has the policy
``{}``. The creator of a job or model holds its owner role through an ordinary binding, so it is
part of the policy and can be changed like any other.

Permissions: ``ml.jobs.getIamPolicy``/``setIamPolicy`` on a job, ``ml.models.…`` on a model, and
``resourcemanager.projects.getIamPolicy``/``setIamPolicy`` on a project (roles/ml.admin only).
Audit: ``google.iam.v1.IAMPolicy.GetIamPolicy`` and ``TestIamPermissions`` (Data Access) and
``SetIamPolicy`` (Admin Activity, with the binding deltas in serviceData). Member pages and the
CLI change policies through the same functions.

The project policy also carries ``auditConfigs``: ADMIN_READ for ``ml.googleapis.com`` or
``allServices`` turns the project's Data Access logs on. DATA_READ and DATA_WRITE are accepted
and have no effect (AI Platform writes none); ``exemptedMembers`` are refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from aiconsole import audit, iam
from aiconsole.errors import Aborted, FailedPrecondition, FieldViolation, InvalidArgument
from aiconsole.models import Project, RoleBinding

IAM_POLICY = "google.iam.v1.IAMPolicy"
GET_IAM_POLICY = f"{IAM_POLICY}.GetIamPolicy"
SET_IAM_POLICY = f"{IAM_POLICY}.SetIamPolicy"
TEST_IAM_PERMISSIONS = f"{IAM_POLICY}.TestIamPermissions"
VALID_VERSIONS = (0, 1, 3)
AUDIT_SERVICES = (audit.SERVICE, "allServices")
LOG_TYPES = ("ADMIN_READ", "DATA_READ", "DATA_WRITE")
CONCURRENT_CHANGE = (
    "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff."
)
MEMBER_FORMAT = "Members are user:USERNAME or user:EMAIL."
OTHER_MEMBER_TYPES = ("group", "serviceAccount", "domain", "deleted", "principal", "principalSet")

Bindings = dict[str, list]  # role → users


@dataclass(frozen=True)
class PolicyKind:
    """What differs between the resource types that carry a policy."""

    resource_type: str
    get_permission: str
    set_permission: str
    service_name: str
    # Which permissions testIamPermissions accepts for this type.
    permission_prefixes: tuple[str, ...]


KINDS = {
    "project": PolicyKind(
        "project",
        "resourcemanager.projects.getIamPolicy",
        "resourcemanager.projects.setIamPolicy",
        "cloudresourcemanager.googleapis.com",
        ("",),
    ),
    "job": PolicyKind("job", "ml.jobs.getIamPolicy", "ml.jobs.setIamPolicy", audit.SERVICE, ("ml.jobs.",)),
    "model": PolicyKind(
        "model", "ml.models.getIamPolicy", "ml.models.setIamPolicy", audit.SERVICE, ("ml.models.", "ml.versions.")
    ),
}


def kind_of(resource) -> PolicyKind:
    holder = iam.policy_holder(resource)
    return KINDS["project" if isinstance(holder, Project) else holder.iam_resource_type]


def member_of(user) -> str:
    return f"user:{user.get_username()}"


# --- reading ----------------------------------------------------------------------------------


def _rows(resource):
    project, resource_type, pk = iam.binding_target(resource)
    return RoleBinding.objects.filter(project=project, resource_type=resource_type, resource_id=pk)


def current_bindings(resource) -> Bindings:
    bindings: Bindings = {}
    for row in _rows(resource).select_related("user").order_by("role", "user__username"):
        bindings.setdefault(row.role, []).append(row.user)
    return bindings


def _audit_configs(resource) -> list[dict]:
    if isinstance(resource, Project) and resource.data_access_logs:
        return [{"service": audit.SERVICE, "auditLogConfigs": [{"logType": "ADMIN_READ"}]}]
    return []


def _policy(bindings: Bindings, audit_configs: list[dict]) -> dict:
    body = [
        {"role": role, "members": sorted({member_of(u) for u in users})}
        for role, users in sorted(bindings.items())
        if users
    ]
    if not body and not audit_configs:
        return {}
    digest = hashlib.sha256(json.dumps([body, audit_configs], sort_keys=True).encode()).digest()
    policy: dict = {"version": 1}
    if body:
        policy["bindings"] = body
    if audit_configs:
        policy["auditConfigs"] = audit_configs
    policy["etag"] = base64.b64encode(digest[:8]).decode()
    return policy


def policy_of(resource) -> dict:
    """The resource's policy as the API returns it (no permission check)."""
    return _policy(current_bindings(resource), _audit_configs(iam.policy_holder(resource)))


def get_policy(resource, *, actor, requested_version: int | None = None) -> dict:
    kind = kind_of(resource)
    if requested_version is not None and requested_version not in VALID_VERSIONS:
        raise InvalidArgument.from_violations(
            [
                FieldViolation(
                    "options.requested_policy_version",
                    f"Invalid requested policy version {requested_version}; valid versions are 0, 1 and 3.",
                )
            ]
        )
    request = {"resource": resource.resource_name}
    if requested_version is not None:
        request["options"] = {"requestedPolicyVersion": requested_version}
    audit.authorize(
        actor,
        kind.get_permission,
        resource,
        method=GET_IAM_POLICY,
        data_access=True,
        request=request,
        service_name=kind.service_name,
    )
    policy = policy_of(resource)
    audit.record(
        actor=actor,
        project=_project_of(resource),
        method=GET_IAM_POLICY,
        resource_name=resource.resource_name,
        permission=kind.get_permission,
        data_access=True,
        request=request,
        response=policy,
        service_name=kind.service_name,
    )
    return policy


@dataclass(frozen=True)
class Member:
    user: object
    roles: list[str]

    @property
    def member(self) -> str:
        return member_of(self.user)


def members(resource, *, actor) -> list[Member]:
    """The resource's members and their roles, for the member and sharing pages (a GetIamPolicy)."""
    get_policy(resource, actor=actor)
    by_user: dict[int, Member] = {}
    for role, users in current_bindings(resource).items():
        for user in users:
            by_user.setdefault(user.pk, Member(user, [])).roles.append(role)
    return sorted(by_user.values(), key=lambda m: m.user.get_username())


def permissions_held(kind: PolicyKind, resource, permissions, *, actor) -> list[str]:
    """The subset of ``permissions`` the caller holds; a missing resource (None) holds none."""
    if not isinstance(permissions, list) or not all(isinstance(p, str) for p in permissions):
        raise InvalidArgument.from_violations([FieldViolation("permissions", "Must be a list of permission names.")])
    violations = [
        FieldViolation(f"permissions[{i}]", f"Permission {p} is not valid for this resource.")
        for i, p in enumerate(permissions)
        if p not in iam.ALL_PERMISSIONS or not p.startswith(kind.permission_prefixes)
    ]
    if violations:
        raise InvalidArgument.from_violations(violations)
    if resource is None:
        return []
    held = [p for p in dict.fromkeys(permissions) if iam.can(actor, p, resource)]
    audit.record(
        actor=actor,
        project=_project_of(resource),
        method=TEST_IAM_PERMISSIONS,
        resource_name=resource.resource_name,
        permission="",
        data_access=True,
        request={"resource": resource.resource_name, "permissions": permissions},
        response={"permissions": held} if held else {},
        service_name=kind.service_name,
    )
    return held


def _project_of(resource) -> Project:
    holder = iam.policy_holder(resource)
    return holder if isinstance(holder, Project) else holder.project


# --- member references ------------------------------------------------------------------------


class MemberError(ValueError):
    pass


def resolve_member(member) -> object:
    """The user a ``user:USERNAME`` or ``user:EMAIL`` member names (MemberError if none)."""
    if not isinstance(member, str) or not member.strip():
        raise MemberError(f"A member must be a non-empty string. {MEMBER_FORMAT}")
    kind, sep, name = member.partition(":")
    if not sep or kind != "user" or not name:
        if sep and kind in OTHER_MEMBER_TYPES:
            raise MemberError(f"Member {member!r}: {kind} members are not supported here. {MEMBER_FORMAT}")
        raise MemberError(f"Invalid member {member!r}. {MEMBER_FORMAT}")
    return find_user(name)


def find_user(name: str):
    """A user by username, or by email when the name holds an @."""
    users = get_user_model().objects
    if "@" in name:
        found = list(users.filter(email__iexact=name)[:2])
        if len(found) > 1:
            raise MemberError(f"More than one user has the email {name}; name the user by username.")
    else:
        found = list(users.filter(username=name))
    if not found:
        raise MemberError(f"User {name!r} does not exist.")
    return found[0]


# --- writing ----------------------------------------------------------------------------------


def _mask_paths(update_mask: str | None, kind: PolicyKind) -> set[str]:
    if not update_mask:
        return {"bindings", "etag"}
    aliases = {
        "bindings": "bindings",
        "etag": "etag",
        "auditConfigs": "auditConfigs",
        "audit_configs": "auditConfigs",
        "version": "version",
    }
    paths, unknown = set(), []
    for path in (p.strip() for p in update_mask.split(",") if p.strip()):
        if path not in aliases or (aliases[path] == "auditConfigs" and kind.resource_type != "project"):
            unknown.append(path)
        else:
            paths.add(aliases[path])
    if unknown:
        raise InvalidArgument.from_violations(
            [
                FieldViolation(
                    "update_mask",
                    f"Field {p!r} cannot be updated on this policy; use bindings, etag"
                    + (", auditConfigs." if kind.resource_type == "project" else "."),
                )
                for p in unknown
            ]
        )
    return paths


def _parse_bindings(raw, kind: PolicyKind, violations: list) -> Bindings:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        violations.append(FieldViolation("policy.bindings", "Must be a list of bindings."))
        return {}
    grantable = iam.roles_grantable_on(kind.resource_type)
    bindings: Bindings = {}
    for i, binding in enumerate(raw):
        field = f"policy.bindings[{i}]"
        if not isinstance(binding, dict):
            violations.append(FieldViolation(field, "A binding must be an object with a role and members."))
            continue
        if binding.get("condition"):
            violations.append(FieldViolation(f"{field}.condition", "Conditional role bindings are not supported."))
        role = binding.get("role")
        if not isinstance(role, str):
            violations.append(FieldViolation(f"{field}.role", "A role name such as roles/ml.viewer is required."))
            continue
        if role not in iam.ROLES:
            violations.append(FieldViolation(f"{field}.role", f"Role {role} is not supported."))
        elif role not in grantable:
            violations.append(
                FieldViolation(
                    f"{field}.role",
                    f"Role {role} is not supported for this resource: a {kind.resource_type} "
                    f"can be granted {', '.join(grantable)}.",
                )
            )
        members = binding.get("members") or []
        if not isinstance(members, list):
            violations.append(FieldViolation(f"{field}.members", "Must be a list of members."))
            continue
        for j, member in enumerate(members):
            try:
                user = resolve_member(member)
            except MemberError as error:
                violations.append(FieldViolation(f"{field}.members[{j}]", str(error)))
                continue
            users = bindings.setdefault(role, [])
            if user not in users:
                users.append(user)
    return bindings


def _parse_audit_configs(raw, violations: list) -> bool:
    """Whether the project's Data Access (ADMIN_READ) logs are on."""
    if raw is None:
        return False
    if not isinstance(raw, list):
        violations.append(FieldViolation("policy.audit_configs", "Must be a list of audit configs."))
        return False
    admin_read = False
    for i, config in enumerate(raw):
        field = f"policy.audit_configs[{i}]"
        service = config.get("service") if isinstance(config, dict) else None
        if not isinstance(service, str) or service not in AUDIT_SERVICES:
            violations.append(
                FieldViolation(
                    f"{field}.service", "Only ml.googleapis.com and allServices can be configured on this server."
                )
            )
            continue
        log_configs = config.get("auditLogConfigs") or []
        if not isinstance(log_configs, list):
            violations.append(FieldViolation(f"{field}.audit_log_configs", "Must be a list of log configs."))
            continue
        for j, log_config in enumerate(log_configs):
            log_type = log_config.get("logType") if isinstance(log_config, dict) else None
            if not isinstance(log_type, str) or log_type not in LOG_TYPES:
                violations.append(
                    FieldViolation(
                        f"{field}.audit_log_configs[{j}].log_type", f"Log type must be one of {', '.join(LOG_TYPES)}."
                    )
                )
            elif log_config.get("exemptedMembers"):
                violations.append(
                    FieldViolation(
                        f"{field}.audit_log_configs[{j}].exempted_members", "Exempted members are not supported."
                    )
                )
            admin_read = admin_read or log_type == "ADMIN_READ"
    return admin_read


def set_policy(resource, policy, *, actor, update_mask: str | None = None) -> dict:
    """Replace the resource's policy (the fields named by the mask, default ``bindings, etag``)."""
    kind = kind_of(resource)
    request = {"resource": resource.resource_name, "policy": policy}
    if update_mask:
        request["updateMask"] = update_mask
    audit.authorize(
        actor, kind.set_permission, resource, method=SET_IAM_POLICY, request=request, service_name=kind.service_name
    )
    if not isinstance(policy, dict):
        raise InvalidArgument.from_violations([FieldViolation("policy", "The policy must be an object.")])
    paths = _mask_paths(update_mask, kind)
    violations: list[FieldViolation] = []
    version = policy.get("version", 1)
    if version not in VALID_VERSIONS:
        violations.append(FieldViolation("policy.version", "Policy versions 0, 1 and 3 are valid."))
    bindings = _parse_bindings(policy.get("bindings"), kind, violations)
    if "auditConfigs" not in paths and kind.resource_type != "project" and policy.get("auditConfigs"):
        violations.append(FieldViolation("policy.audit_configs", "Audit configs belong to the project policy."))
    data_access = _parse_audit_configs(policy.get("auditConfigs"), violations) if "auditConfigs" in paths else None
    etag = policy.get("etag") if "etag" in paths else None
    if etag is not None and not isinstance(etag, str):
        violations.append(FieldViolation("policy.etag", "The etag must be a string."))
    if violations:
        raise InvalidArgument.from_violations(violations)
    change = (lambda current: bindings) if "bindings" in paths else None
    return _apply(
        resource, kind, actor=actor, change=change, data_access=data_access, etag=etag or None, request=request
    )


def _apply(
    resource,
    kind: PolicyKind,
    *,
    actor,
    change: Callable[[Bindings], Bindings] | None,
    data_access: bool | None = None,
    etag: str | None = None,
    request: dict | None = None,
) -> dict:
    """Change bindings (and audit configs) under a lock on the project row, check the etag and the
    last admin, write the Admin Activity entry with the deltas; return the new policy."""
    project = _project_of(resource)
    with transaction.atomic():
        locked = Project.objects.select_for_update().get(pk=project.pk)
        holder = locked if isinstance(iam.policy_holder(resource), Project) else iam.policy_holder(resource)
        current = current_bindings(holder)
        before = _policy(current, _audit_configs(holder))
        if etag is not None and etag != before.get("etag"):
            raise Aborted(CONCURRENT_CHANGE)
        new = change(current) if change is not None else current
        if kind.resource_type == "project":
            _keep_an_admin(locked, current, new)
        binding_deltas = _replace_rows(holder, current, new)
        config_deltas = []
        if data_access is not None and data_access != locked.data_access_logs:
            locked.data_access_logs = data_access
            locked.save(update_fields=["data_access_logs"])
            config_deltas = [
                {"action": "ADD" if data_access else "REMOVE", "service": audit.SERVICE, "logType": "ADMIN_READ"}
            ]
        after = policy_of(holder)
        if request is None:
            request = {"resource": resource.resource_name, "policy": {k: v for k, v in after.items() if k != "etag"}}
        delta = {}
        if binding_deltas:
            delta["bindingDeltas"] = binding_deltas
        if config_deltas:
            delta["auditConfigDeltas"] = config_deltas
        audit.record(
            actor=actor,
            project=locked,
            method=SET_IAM_POLICY,
            resource_name=resource.resource_name,
            permission=kind.set_permission,
            request=request,
            response=after,
            service_name=kind.service_name,
            service_data={"@type": "type.googleapis.com/google.iam.v1.logging.AuditData", "policyDelta": delta},
        )
    project.data_access_logs = locked.data_access_logs
    return after


def _replace_rows(resource, current: Bindings, new: Bindings) -> list[dict]:
    old_pairs = {(role, user.pk): user for role, users in current.items() for user in users}
    new_pairs = {(role, user.pk): user for role, users in new.items() for user in users}
    project, resource_type, pk = iam.binding_target(resource)
    deltas = []
    for role, user_pk in sorted(old_pairs.keys() - new_pairs.keys()):
        _rows(resource).filter(role=role, user_id=user_pk).delete()
        deltas.append({"action": "REMOVE", "role": role, "member": member_of(old_pairs[(role, user_pk)])})
    for role, user_pk in sorted(new_pairs.keys() - old_pairs.keys()):
        RoleBinding.objects.create(
            project=project, resource_type=resource_type, resource_id=pk, role=role, user=new_pairs[(role, user_pk)]
        )
        deltas.append({"action": "ADD", "role": role, "member": member_of(new_pairs[(role, user_pk)])})
    return deltas


def _keep_an_admin(project: Project, current: Bindings, new: Bindings) -> None:
    before = {u.pk for u in current.get(iam.ADMIN_ROLE, []) if u.is_active}
    after = {u.pk for u in new.get(iam.ADMIN_ROLE, []) if u.is_active}
    if before and not after:
        raise FailedPrecondition(
            f"Project {project.project_id} must keep at least one admin ({iam.ADMIN_ROLE}): "
            "add another admin before removing the last one."
        )


# --- member changes (the member and sharing pages, the CLI) --------------------------------------


def _check_role(kind: PolicyKind, role: str) -> None:
    grantable = iam.roles_grantable_on(kind.resource_type)
    if role not in grantable:
        raise InvalidArgument.from_violations(
            [
                FieldViolation(
                    "role",
                    f"Role {role} cannot be granted on a {kind.resource_type}; choose one of {', '.join(grantable)}.",
                )
            ]
        )


def _user_for(identifier: str):
    """A user named as on the member pages: username, email, or a full ``user:…`` member."""
    identifier = (identifier or "").strip()
    try:
        return resolve_member(identifier if ":" in identifier else f"user:{identifier}")
    except MemberError as error:
        raise InvalidArgument.from_violations([FieldViolation("member", str(error))]) from None


def add_member(resource, identifier: str, role: str, *, actor):
    """Grant a role to a user named by username or email (``user:`` prefix optional)."""
    kind = kind_of(resource)
    audit.authorize(actor, kind.set_permission, resource, method=SET_IAM_POLICY, service_name=kind.service_name)
    _check_role(kind, role)
    user = _user_for(identifier)

    def change(current: Bindings) -> Bindings:
        users = current.get(role, [])
        return {**current, role: users if user in users else [*users, user]}

    _apply(resource, kind, actor=actor, change=change)
    return user


def remove_binding(resource, identifier: str, role: str, *, actor):
    """Take one role away from a user; InvalidArgument when they do not hold it here."""
    kind = kind_of(resource)
    audit.authorize(actor, kind.set_permission, resource, method=SET_IAM_POLICY, service_name=kind.service_name)
    user = _user_for(identifier)

    def change(current: Bindings) -> Bindings:
        if user not in current.get(role, []):
            raise InvalidArgument.from_violations(
                [FieldViolation("member", f"{member_of(user)} does not hold {role} on {resource.resource_name}.")]
            )
        return {**current, role: [u for u in current[role] if u != user]}

    _apply(resource, kind, actor=actor, change=change)
    return user


def change_member_role(resource, user, role: str, *, actor) -> None:
    """Give a member exactly one role on the resource, replacing the roles they held there."""
    kind = kind_of(resource)
    audit.authorize(actor, kind.set_permission, resource, method=SET_IAM_POLICY, service_name=kind.service_name)
    _check_role(kind, role)

    def change(current: Bindings) -> Bindings:
        new = {r: [u for u in users if u != user] for r, users in current.items()}
        new.setdefault(role, []).append(user)
        return new

    _apply(resource, kind, actor=actor, change=change)


def remove_member(resource, user, *, actor) -> None:
    """Take every role the user holds on the resource away."""
    kind = kind_of(resource)
    audit.authorize(actor, kind.set_permission, resource, method=SET_IAM_POLICY, service_name=kind.service_name)
    _apply(
        resource,
        kind,
        actor=actor,
        change=lambda current: {r: [u for u in users if u != user] for r, users in current.items()},
    )


def set_data_access_logs(project: Project, enabled: bool, *, actor) -> None:
    """Turn the project's Data Access (ADMIN_READ) audit logs on or off."""
    kind = KINDS["project"]
    audit.authorize(actor, kind.set_permission, project, method=SET_IAM_POLICY, service_name=kind.service_name)
    configs = [{"service": audit.SERVICE, "auditLogConfigs": [{"logType": "ADMIN_READ"}]}] if enabled else []
    _apply(
        project,
        kind,
        actor=actor,
        change=None,
        data_access=enabled,
        request={"resource": project.resource_name, "policy": {"auditConfigs": configs}, "updateMask": "auditConfigs"},
    )
