"""``/v1/projects/P/notificationRules`` (GET list, POST create) and ``…/notificationRules/ID`` (GET with
its last deliveries, DELETE): thin adapters over ``jobs.notifications.rules``."""

from __future__ import annotations

from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts
from jobs.notifications import rules


@api_view(["GET", "POST"])
def rules_collection(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "POST":
        return Response(rules.create_rule(project, request.data, actor=request.user))
    found = rules.list_rules(project, actor=request.user)
    return Response({"notificationRules": [rules.resource(rule) for rule in found]} if found else {})


@api_view(["GET", "DELETE"])
def rule_item(request, project_id, rule_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "DELETE":
        rules.delete_rule(project, rule_id, actor=request.user)
        return Response({})
    rule = rules.find_rule(project, rule_id, actor=request.user, permission=rules.READ, method="GetNotificationChannel")
    return Response(rules.resource(rule, deliveries=True))
