"""The user's own profile: API tokens they create and revoke."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from aiconsole.models import ApiToken
from aiconsole.tokens import create_token, revoke_token


@login_required
def profile(request):
    context = {"tokens": ApiToken.objects.filter(user=request.user).order_by("-created"),
               "new_token": request.session.pop("new_token", None)}
    return render(request, "aiconsole/profile.html", context)


@login_required
@require_POST
def token_create(request):
    name = request.POST.get("name", "").strip()
    if len(name) > 100:
        messages.error(request, "Token name: at most 100 characters.")
        return redirect("profile")
    _, raw = create_token(request.user, name=name, actor=request.user)
    # Shown once, on the next page view, then gone: only its hash is stored.
    request.session["new_token"] = raw
    return redirect("profile")


@login_required
@require_POST
def token_revoke(request, token_id):
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)
    revoke_token(token, actor=request.user)
    messages.success(request, f"Token {token.hint}… revoked.")
    return redirect("profile")
