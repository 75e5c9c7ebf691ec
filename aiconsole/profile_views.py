"""The user's own profile: their password, and API tokens they create and revoke."""

from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts
from aiconsole.errors import ServiceError
from aiconsole.models import ApiToken
from aiconsole.tokens import create_token, revoke_token
from aiconsole.user_forms import PASSWORD_HELP, ChangePasswordForm


@login_required
def profile(request):
    return _profile_page(request)


def _profile_page(request, new_token: str | None = None, status: int = 200, password_form=None):
    context = {
        "tokens": ApiToken.objects.filter(user=request.user).order_by("-created"),
        "new_token": new_token,
        "password_form": password_form or ChangePasswordForm(),
        "password_help": PASSWORD_HELP,
    }
    response = render(request, "aiconsole/profile.html", context, status=status)
    if new_token:
        response["Cache-Control"] = "no-store"  # the raw token is in this page, and only here
    return response


@login_required
@require_POST
def password_change(request):
    """Needs the current password; other sessions end, this one stays signed in."""
    form = ChangePasswordForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            accounts.change_password(
                request.user, data["current_password"], data["new_password"], keep_session=request.session.session_key
            )
        except ServiceError as error:
            form.add_service_error(error)
        else:
            update_session_auth_hash(request, request.user)
            messages.success(request, "Your password is changed. Your other sessions were signed out.")
            return redirect("profile")
    return _profile_page(request, password_form=form)


@login_required
@require_POST
def token_create(request):
    name = request.POST.get("name", "").strip()
    if len(name) > 100:
        messages.error(request, "Token name: at most 100 characters.")
        return redirect("profile")
    _, raw = create_token(request.user, name=name, actor=request.user)
    # Shown once, in this response, and kept nowhere (not in the session): only its hash is stored.
    return _profile_page(request, new_token=raw, status=201)


@login_required
@require_POST
def token_revoke(request, token_id):
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)
    revoke_token(token, actor=request.user)
    messages.success(request, f"Token {token.hint}… revoked.")
    return redirect("profile")
