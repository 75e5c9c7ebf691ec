"""The summary of a form's errors, shown at the top of every form: each error with the field it
belongs to, linked to that field, so one that sits far down a long form is seen at once.

``{% error_summary form %}`` for a Django form; ``{% error_summary entries=errors %}`` for a page
that checks its fields itself, with ``errors`` a list of ``(field_id, label, message)`` (an empty
field id: an error of the whole form).
"""

from django import template

register = template.Library()


def form_entries(form) -> list[tuple[str, str, str]]:
    """A bound form's errors as ``(field_id, label, message)``, in the order of its fields."""
    if form is None or not getattr(form, "is_bound", False):
        return []
    entries = [("", "", message) for message in form.non_field_errors()]
    for field in form:
        if field.is_hidden:
            entries += [("", "", message) for message in field.errors]
            continue
        entries += [(field.id_for_label or field.auto_id, str(field.label), message) for message in field.errors]
    return entries


@register.inclusion_tag("aiconsole/_error_summary.html")
def error_summary(form=None, entries=None):
    entries = list(entries or []) or form_entries(form)
    return {"entries": entries, "count": len(entries)}
