"""Pydantic's validation errors of a config file, told as a person reads the file.

Two things pydantic says in its own terms: a key the model does not have ("Extra inputs are not
permitted": which keys are there, then?) and a value that fits no member of a union (one error per
member, each with a tag in its location: ``budget.memory_gib.literal['auto']`` and
``budget.memory_gib.constrained-float``). :func:`explain` gives one location and one message for each
place, the tags dropped and the allowed keys named.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

Loc = tuple[str | int, ...]


def _direct(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation is, itself or in a union (``X``, ``X | None``, ``str | X``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _direct(a)]
    return []


def _contained(annotation: Any) -> list[type[BaseModel]]:
    """The models under a list or dict of an annotation (``list[str | X]``, ``dict[str, X] | None``)."""
    origin = typing.get_origin(annotation)
    if origin in (list, dict, tuple):
        return [m for a in typing.get_args(annotation) for m in _direct(a)]
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _contained(a)]
    return []


def _is_tag(part: str | int) -> bool:
    """A union member's tag in a location: ``literal['auto']``, ``constrained-float``, ``int``."""
    return isinstance(part, str) and (
        "[" in part or "-" in part or part in {"int", "float", "str", "bool", "none", "list", "dict"}
    )


def _walk(root: type[BaseModel], loc: Loc) -> tuple[Loc, type[BaseModel], bool]:
    """(``loc`` without union-member tags, the model whose key the last part is, whether the error is
    a scalar member's of a union that also holds a model: noise beside that model's own errors)."""
    kept: list[str | int] = []
    model: type[BaseModel] | None = root  # the model whose keys the next part may be
    members: list[type[BaseModel]] = []  # models a union here may be (named by their tag)
    inside: list[type[BaseModel]] = []  # the models under a list or dict, reached by an index or key
    owner, scalar_member = root, False
    for part in loc:
        named = next((m for m in members if m.__name__ == part), None)
        if named is not None:
            model, members = named, []
        elif model is not None and part not in model.model_fields and _is_tag(part):
            scalar_member = True  # a union's scalar member (``str | X`` read as X first)
        elif model is not None:
            owner = model
            kept.append(part)
            field = model.model_fields.get(part) if isinstance(part, str) else None
            ann = field.annotation if field is not None else None
            members, inside = _direct(ann), _contained(ann)
            model = members[0] if len(members) == 1 and not _is_union(ann) else None
        elif inside and not _is_tag(part):
            kept.append(part)
            members, inside = inside, []
            model = members[0] if len(members) == 1 else None
        elif not _is_tag(part):
            kept.append(part)
        elif members:
            scalar_member = True
    return tuple(kept), owner, scalar_member


def _is_union(annotation: Any) -> bool:
    """A union with more than a model and None (``str | X``): pydantic tags its members' errors."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return False
    return len([a for a in typing.get_args(annotation) if a is not type(None)]) > 1


def explain(exc: ValidationError, root: type[BaseModel], limit: int = 5) -> list[tuple[Loc, str]]:
    """One (location, message) per place in error, tags dropped, unknown keys with the keys allowed."""
    merged: dict[Loc, list[str]] = {}
    walked = [(err, *_walk(root, tuple(err["loc"]))) for err in exc.errors()]
    deeper = [loc for _, loc, _, scalar in walked if not scalar]
    for err, loc, model, scalar in walked:
        if scalar and any(len(d) > len(loc) and d[: len(loc)] == loc for d in deeper):
            continue  # "Input should be a valid string" beside what the model member says
        if err["type"] == "extra_forbidden":
            keys = ", ".join(model.model_fields)
            message = f"not a key here (the keys here: {keys})"
        elif err["type"] == "model_type":  # "... or instance of Route": a Python class, not the file's words
            message = "Input should be a valid dictionary"
        else:
            message = str(err["msg"]).removeprefix("Value error, ")  # a validator's own words, as written
        messages = merged.setdefault(loc, [])
        if message not in messages:
            messages.append(message)
    return [(loc, " or ".join(msgs)) for loc, msgs in list(merged.items())[:limit]]
