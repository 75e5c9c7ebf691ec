"""The Users page (platform admins): create users, set passwords or issue one-time set-password
links, deactivate and reactivate, make platform admins; and the page a set-password link opens.

Thin adapters over ``aiconsole.accounts``. Anyone else gets the console's 403 page: the services
raise ``iam.PermissionDenied`` and the IAM middleware renders it. A new link is shown once, in the
response that makes it (``Cache-Control: no-store``), and kept nowhere.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from aiconsole import accounts
from aiconsole.errors import ServiceError
from aiconsole.team_views import plain_message
from aiconsole.user_forms import PASSWORD_HELP, NewUserForm, SetPasswordForm


def _require_admin(request) -> None:
    """The Users pages are for platform admins; ``list_users`` audits and raises for the rest."""
    accounts.list_users(actor=request.user)


def _user(request, username: str):
    _require_admin(request)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise Http404("No such user.")
    return user


def _with_link(request, template: str, context: dict, status: int):
    response = render(request, template, context, status=status)
    response["Cache-Control"] = "no-store"  # the link is in this page, and only here
    return response


def _link_context(request, user, path: str, expires) -> dict:
    return {
        "link_user": user,
        "link": request.build_absolute_uri(path),
        "link_expires": expires,
        "link_hours": accounts.PASSWORD_LINK_HOURS,
    }


@login_required
def users(request):
    """Every account, and the form that creates one (POST here)."""
    rows = accounts.list_users(actor=request.user)
    form = NewUserForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data, link = form.cleaned_data, form.cleaned_data["how"] == NewUserForm.LINK
        try:
            user, _ = accounts.create_user(
                data["username"],
                actor=request.user,
                email=data["email"],
                name=data["name"],
                password=None if link else data["password"],
                password_link=link,
            )
        except ServiceError as error:
            form.add_service_error(error)
        else:
            if not link:
                messages.success(request, f"Created {user.get_username()} with the password you set.")
                return redirect("user_detail", user.get_username())
            path, expires = accounts.create_password_link(user, actor=request.user)
            context = {
                "shown": user,
                "created": True,
                **_link_context(request, user, path, expires),
                **_detail_context(request, user),
            }
            return _with_link(request, "aiconsole/user_detail.html", context, status=201)
    context = {"users": rows, "form": form, "password_help": PASSWORD_HELP}
    return render(request, "aiconsole/users.html", context)  # errors on 200, as the other forms


def _detail_context(request, user, password_form=None) -> dict:
    return {
        "shown": user,
        "password_form": password_form or SetPasswordForm(),
        "password_help": PASSWORD_HELP,
        "is_self": user.pk == request.user.pk,
        "tokens": user.api_tokens.active().count(),
    }


@login_required
def user_detail(request, username):
    user = _user(request, username)
    return render(request, "aiconsole/user_detail.html", _detail_context(request, user))


@login_required
@require_POST
def user_password(request, username):
    user = _user(request, username)
    form = SetPasswordForm(request.POST)
    if form.is_valid():
        try:
            accounts.set_password(user, form.cleaned_data["new_password"], actor=request.user)
        except ServiceError as error:
            form.add_service_error(error)
        else:
            messages.success(request, f"{user.get_username()}'s password is set; their sessions were signed out.")
            return redirect("user_detail", username)
    return render(request, "aiconsole/user_detail.html", _detail_context(request, user, form))


@login_required
@require_POST
def user_link(request, username):
    user = _user(request, username)
    try:
        path, expires = accounts.create_password_link(user, actor=request.user)
    except ServiceError as error:
        messages.error(request, plain_message(error))
        return redirect("user_detail", username)
    context = {**_detail_context(request, user), **_link_context(request, user, path, expires)}
    return _with_link(request, "aiconsole/user_detail.html", context, status=201)


def _change(request, username: str, change, done: str):
    user = _user(request, username)
    try:
        change(user)
    except ServiceError as error:
        messages.error(request, plain_message(error))
    else:
        messages.success(request, done.format(name=user.get_username()))
    return redirect("user_detail", username)


@login_required
@require_POST
def user_deactivate(request, username):
    return _change(
        request,
        username,
        lambda user: accounts.deactivate_user(user, actor=request.user),
        "{name} is deactivated: their sessions ended and their API tokens are revoked.",
    )


@login_required
@require_POST
def user_reactivate(request, username):
    return _change(
        request, username, lambda user: accounts.reactivate_user(user, actor=request.user), "{name} is active again."
    )


@login_required
@require_POST
def user_admin(request, username):
    admin = request.POST.get("admin") == "on"
    return _change(
        request,
        username,
        lambda user: accounts.set_platform_admin(user, admin, actor=request.user),
        "{name} is now a platform admin." if admin else "{name} is no longer a platform admin.",
    )


# --- the page a set-password link opens (signed out) ----------------------------------------------


@never_cache
def password_link(request, uid, token):
    user = accounts.user_for_password_link(uid, token)
    if user is None:
        return render(request, "aiconsole/password_link.html", {"invalid": True}, status=404)
    form = SetPasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            accounts.use_password_link(uid, token, form.cleaned_data["new_password"])
        except ServiceError as error:
            form.add_service_error(error)
        else:
            messages.success(request, "Your password is set. Sign in with it now.")
            return redirect("login")
    context = {"form": form, "link_user": user, "password_help": PASSWORD_HELP}
    # The token is in this page's address; SecurityMiddleware's Referrer-Policy (same-origin) keeps
    # it from other sites, and the page loads nothing from them.
    return render(request, "aiconsole/password_link.html", context)
