"""Per-route request rewriting: defaults fill what the request left out, override replaces.

Both walk nested objects (``chat_template_kwargs: {enable_thinking: false}`` keeps the client's other
template kwargs). A ``null`` in ``override`` removes the field; a ``null`` from the client counts as absent
for ``defaults``. The alias in ``model`` becomes the backend's served model name.
"""

from __future__ import annotations

import copy
from typing import Any


def fill_defaults(body: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Set every field of ``defaults`` the body lacks (or has as null); recurse into objects."""
    for key, value in defaults.items():
        current = body.get(key)
        if current is None:
            body[key] = copy.deepcopy(value)
        elif isinstance(current, dict) and isinstance(value, dict):
            fill_defaults(current, value)


def apply_override(body: dict[str, Any], override: dict[str, Any]) -> None:
    """Replace the body's fields with ``override``'s (objects merged key by key; null deletes)."""
    for key, value in override.items():
        if value is None:
            body.pop(key, None)
        elif isinstance(value, dict) and isinstance(body.get(key), dict):
            apply_override(body[key], value)
        else:
            body[key] = copy.deepcopy(value)


def rewrite_request(
    body: dict[str, Any], *, defaults: dict[str, Any], override: dict[str, Any], served_model: str | None
) -> dict[str, Any]:
    """The body the backend gets (the caller's dict is changed in place and returned)."""
    fill_defaults(body, defaults)
    apply_override(body, override)
    if served_model:
        body["model"] = served_model
    return body
