"""Forms of the Users page, the set-password link and the profile's password change.

They only parse input; the rules (username, password validators, the current password) are the
services' (``aiconsole.accounts``), whose field violations come back onto the fields. Every error
names its field, so it reads right on its own (a screen reader, a message at the top).
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.validators import UnicodeUsernameValidator

from aiconsole.errors import ServiceError

PASSWORD_HELP = "At least 8 characters, not a common password, and not like the username, name or email."


def password_field(label: str, *, required: bool = True, autocomplete: str = "new-password") -> forms.CharField:
    return forms.CharField(
        label=label,
        required=required,
        strip=False,
        max_length=4096,
        widget=forms.PasswordInput(attrs={"autocomplete": autocomplete}),
    )


class NamedErrorsForm(forms.Form):
    """Field errors start with the field's label ("New password: …"); fields with errors are
    marked ``aria-invalid`` and point at their messages."""

    field_of_violation: dict[str, str] = {}

    def full_clean(self):
        super().full_clean()
        for name, errors in list(self._errors.items()):
            if name in self.fields:
                self._errors[name] = self.error_class([self._named(name, e) for e in errors])
                self._mark_invalid(name)

    def _named(self, name: str, message: str) -> str:
        label = str(self.fields[name].label or name)
        if message == "This field is required.":
            return f"{label} is required."
        return message if message.startswith(f"{label}:") else f"{label}: {message}"

    def _mark_invalid(self, name: str) -> None:
        attrs = self.fields[name].widget.attrs
        attrs["aria-invalid"] = "true"
        described = [f"id_{name}_errors"] + ([f"id_{name}_helptext"] if self.fields[name].help_text else [])
        attrs["aria-describedby"] = " ".join(described)

    def add_service_error(self, error: ServiceError) -> None:
        """The service's refusal on the fields it names; the rest above the form."""
        if not error.violations:
            self.add_error(None, error.message)
        for violation in error.violations:
            name = self.field_of_violation.get(violation.field, violation.field)
            if name in self.fields:
                self.add_error(name, self._named(name, violation.description))
                self._mark_invalid(name)
            else:
                self.add_error(None, violation.description)


class NewUserForm(NamedErrorsForm):
    LINK, PASSWORD = "link", "password"

    username = forms.CharField(
        label="Username",
        max_length=150,
        validators=[UnicodeUsernameValidator()],
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        help_text="Letters, digits and @ . + - _ only; they sign in with it.",
    )
    name = forms.CharField(label="Name", required=False, max_length=150)
    email = forms.EmailField(label="Email", required=False)
    how = forms.ChoiceField(
        label="First password",
        initial=LINK,
        widget=forms.RadioSelect,
        choices=[
            (LINK, "Give them a one-time link to set their own password"),
            (PASSWORD, "Set a password now and tell it to them"),
        ],
    )
    password = password_field("Password", required=False)

    field_of_violation = {
        "user.username": "username",
        "user.email": "email",
        "user.name": "name",
        "user.password": "password",
    }

    def clean(self):
        data = super().clean()
        if data.get("how") == self.PASSWORD and not data.get("password"):
            self.add_error("password", "Password is required when you set a password now.")
        return data


class SetPasswordForm(NamedErrorsForm):
    """An admin sets a user's password, or a user sets theirs through a link."""

    new_password = password_field("New password")
    confirm_password = password_field("Confirm new password")

    field_of_violation = {"password": "new_password", "new_password": "new_password"}

    def clean(self):
        data = super().clean()
        new, confirm = data.get("new_password"), data.get("confirm_password")
        if new and confirm and new != confirm:
            self.add_error("confirm_password", "Confirm new password: it does not match the new password.")
        return data


class ChangePasswordForm(SetPasswordForm):
    current_password = password_field("Current password", autocomplete="current-password")

    field_order = ["current_password", "new_password", "confirm_password"]
    field_of_violation = {"current_password": "current_password", "new_password": "new_password"}
