"""The job file reference (docs/reference/job-file.md): every section and key of a training
and a tuning job file, from the pydantic models that validate them."""

from __future__ import annotations

import ast
import enum
import inspect
import io
import json
import tokenize
import types
import typing
from collections.abc import Iterator
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import docs_markdown as md

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo


def job_file_reference() -> str:
    from scaletune.spec import TrainingJobSpec, TuningJobSpec

    files = (("training job file", TrainingJobSpec), ("tuning job file", TuningJobSpec))
    parts: list[str] = []
    seen: set[type[BaseModel]] = set()
    for file, root in files:
        parts.append(f"## {file.capitalize()}")
        for model in _models(root, seen):
            parts.append(_model_section(model, files))
    return "\n\n".join(parts) + "\n"


def _models(root: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[type[BaseModel]]:
    """The root model, then each model its fields hold (depth first), each only once."""
    if root in seen:
        return
    seen.add(root)
    yield root
    for field in root.model_fields.values():
        for nested in _nested_models(field.annotation):
            yield from _models(nested, seen)


def _nested_models(annotation: Any) -> Iterator[type[BaseModel]]:
    from pydantic import BaseModel

    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for argument in typing.get_args(annotation):
        yield from _nested_models(argument)


def _places(root: type[BaseModel], model: type[BaseModel]) -> list[str]:
    """Where `model` sits in a file whose top level is `root`: dotted keys."""
    found: list[str] = []

    def walk(current: type[BaseModel], prefix: str, depth: int) -> None:
        if depth > 6:
            return
        for name, field in current.model_fields.items():
            for key, nested in _keyed_models(name, field.annotation):
                path = f"{prefix}{key}"
                if nested is model:
                    found.append(path)
                else:
                    walk(nested, f"{path}.", depth + 1)

    walk(root, "", 0)
    return sorted(set(found), key=found.index)


def _keyed_models(key: str, annotation: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models a field holds, each with the key it is written under."""
    from pydantic import BaseModel

    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield key, annotation
    elif origin is dict:
        for nested in _nested_models(typing.get_args(annotation)[1]):
            yield f"{key}.<name>", nested
    elif origin in (list, tuple, set, frozenset):
        for nested in _nested_models(annotation):
            yield f"{key}[]", nested
    else:
        for argument in typing.get_args(annotation):
            yield from _keyed_models(key, argument)


def _model_section(model: type[BaseModel], files: tuple[tuple[str, type[BaseModel]], ...]) -> str:
    lines = [f"### {model.__name__}"]
    where = []
    for file, root in files:
        if model is root:
            where.append(f"the top level of a {file}")
        elif places := _places(root, model):
            where.append(f"in a {file}: " + ", ".join(md.code(place) for place in places))
    sentence = "; ".join(where) or "nowhere"
    lines.append(sentence[0].upper() + sentence[1:] + ".")
    doc = md.paragraphs(model.__dict__.get("__doc__"))
    if doc:
        lines.append(doc)
    notes = _field_notes(model)
    rows = [_field_row(name, field, notes.get(name)) for name, field in model.model_fields.items()]
    lines.append(md.table(("key", "type", "default", "description"), rows))
    return "\n\n".join(lines)


def _field_row(name: str, field: FieldInfo, note: str | None) -> tuple[str, str, str, str]:
    key = md.code(field.alias or name)
    if field.alias and field.alias != name:
        key += f" (`{name}`)"
    kind = _render_type(field.annotation)
    bounds = _bounds(field.metadata)
    if bounds:
        kind += ", " + ", ".join(bounds)
    return key, kind, _default(field), md.text(field.description or note or "")


def _default(field: FieldInfo) -> str:
    from pydantic import BaseModel

    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "its defaults"
        return md.code(_toml(value))
    if field.default is None:
        return "unset"
    return md.code(_toml(field.default))


def _toml(value: Any) -> str:
    """A default as it is written in a TOML file."""
    if isinstance(value, enum.Enum):
        return _toml(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | PurePath):
        return json.dumps(str(value))
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{value:.1f}"
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{key} = {_toml(item)}" for key, item in value.items())
        return "{ " + inner + " }" if inner else "{}"
    return repr(value)


def _bounds(metadata: list[Any]) -> list[str]:
    """Numeric and length limits (annotated_types' Ge, Gt, Le, Lt, MinLen, MaxLen)."""
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    out = []
    for item in metadata:
        for attribute, sign in signs.items():
            limit = getattr(item, attribute, None)
            if limit is not None and type(item).__name__.lower() == attribute:
                out.append(f"{sign} {limit:,}" if isinstance(limit, int) else f"{sign} {limit}")
        if type(item).__name__ == "MinLen":
            out.append(f"length ≥ {item.min_length}")
        elif type(item).__name__ == "MaxLen":
            out.append(f"length ≤ {item.max_length}")
    return [bound.replace("<", "&lt;") for bound in out]


def _unwrap(annotation: Any) -> Any:
    """The type inside `Annotated[...]` (nested ones too)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _render_type(annotation: Any) -> str:
    """A compact type: `int | None`, `list[str]`, enum values listed, models linked."""
    pieces = _type_pieces(annotation)
    if all(kind == "code" for kind, _ in pieces):
        return md.code("".join(value for _, value in pieces))
    # A link cannot sit inside a code span: names in code, the punctuation as text.
    punctuation = {" | ": " \\| ", ", ": ", ", "[": "\\[", "]": "\\]"}
    out = []
    for kind, value in pieces:
        if kind == "link":
            out.append(value)
        elif value.endswith("["):
            out.append(md.code(value[:-1]) + punctuation["["])
        else:
            out.append(punctuation.get(value) or md.code(value))
    return "".join(out)


def _type_pieces(annotation: Any) -> list[tuple[str, str]]:
    """The type as pieces of code and links (a link cannot sit inside a code span)."""
    from pydantic import BaseModel

    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if annotation is None or annotation is type(None):
        return [("code", "None")]
    if annotation is Any:
        return [("code", "any")]
    if _is_union(annotation):
        members: list[Any] = []
        for argument in map(_unwrap, arguments):
            members += list(typing.get_args(argument)) if _is_union(argument) else [argument]
        members.sort(key=lambda member: member is type(None))  # None last
        return _joined([_type_pieces(member) for member in members], " | ")
    if origin is typing.Literal:
        return [("code", " | ".join(json.dumps(value) for value in arguments))]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [("code", " | ".join(json.dumps(member.value) for member in annotation))]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        name = annotation.__name__
        return [("link", f"[{name}](#{name.lower()})")]
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        inner_pieces = _joined([_type_pieces(argument) for argument in arguments], ", ")
        return [("code", f"{name}["), *inner_pieces, ("code", "]")]
    if isinstance(annotation, type):
        return [("code", annotation.__name__)]
    return [("code", str(annotation))]


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) is typing.Union or isinstance(annotation, types.UnionType)


def _joined(parts: list[list[tuple[str, str]]], separator: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for index, part in enumerate(parts):
        if index:
            out.append(("code", separator))
        out += part
    return out


def _field_notes(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring, else the comments written beside it in the source: the comment
    lines right above it, or the comment ending its line."""
    notes: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if cls.__module__.startswith("scaletune.") and inspect.get_annotations(cls):
            notes.update(_source_notes(cls))
    return notes


def _source_notes(cls: type) -> dict[str, str]:
    try:
        source = inspect.cleandoc("\n" + inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comments: dict[int, str] = {}  # line number: comment text
    full_line: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row = token.start[0]
            comments[row] = token.string.lstrip("#").strip()
            if not lines[row - 1][: token.start[1]].strip():
                full_line.add(row)
    notes: dict[str, str] = {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    statements = body.body
    for index, statement in enumerate(statements):
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        name = statement.target.id
        following = statements[index + 1] if index + 1 < len(statements) else None
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            notes[name] = inspect.cleandoc(following.value.value)
            continue
        above: list[str] = []
        row = statement.lineno - 1
        while row in full_line:
            above.insert(0, comments[row])
            row -= 1
        trailing = comments.get(statement.lineno)
        if above:
            notes[name] = " ".join(above)
        elif trailing and statement.end_lineno == statement.lineno:
            notes[name] = trailing  # a one-line field with its comment at the end
    return notes


# --- The CLI reference ------------------------------------------------------------------
