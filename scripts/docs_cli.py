"""The command-line reference (docs/reference/cli.md): every command of the Typer app, its
help, usage and parameters."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import docs_markdown as md


def cli_reference() -> str:
    import typer.main

    from scaletune.cli import app

    root = typer.main.get_command(app)
    sections = [_command_section(command, path) for command, path in _commands(root, ["scaletune"])]
    return "\n\n".join(sections) + "\n"


def _commands(command: Any, path: list[str]) -> Iterator[tuple[Any, list[str]]]:
    """The command and its subcommands, depth first, by name (hidden ones left out)."""
    yield command, path
    children: dict[str, Any] = getattr(command, "commands", None) or {}
    for name in sorted(children):
        child = children[name]
        if not getattr(child, "hidden", False):
            yield from _commands(child, [*path, name])


def _command_section(command: Any, path: list[str]) -> str:
    level = "#" * min(1 + max(len(path) - 1, 1), 4)
    name = " ".join(path)
    lines = [f"{level} {name}"]
    help_text = md.paragraphs(getattr(command, "help", None))
    if help_text:
        lines.append(help_text)
    params = [param for param in command.params if not getattr(param, "hidden", False)]
    usage = [name]
    if any(_is_option(param) for param in params):
        usage.append("[OPTIONS]")
    for param in params:
        if not _is_option(param):
            usage.append(_argument_usage(param))
    if getattr(command, "commands", None):
        usage.append("COMMAND [ARGS]...")
    lines.append("Usage: " + md.code(" ".join(usage)))
    if getattr(command, "commands", None):
        children = [
            f"[`{child}`](#{'-'.join([*path, child])})"
            for child in sorted(command.commands)
            if not getattr(command.commands[child], "hidden", False)
        ]
        lines.append("Commands: " + ", ".join(children) + ".")
    if params:
        rows = [_param_row(param) for param in params]
        lines.append(md.table(("argument or option", "type", "default", "help"), rows))
    return "\n\n".join(lines)


def _is_option(param: Any) -> bool:
    return bool(getattr(param, "opts", None)) and str(param.opts[0]).startswith("-")


def _argument_usage(param: Any) -> str:
    metavar = str(param.name).upper()
    if getattr(param, "nargs", 1) == -1:
        metavar += "..."
    return metavar if param.required else f"[{metavar}]"


def _param_row(param: Any) -> tuple[str, str, str, str]:
    if _is_option(param):
        names = " / ".join(
            ", ".join(md.code(opt) for opt in group)
            for group in (param.opts, param.secondary_opts)
            if group
        )
    else:
        names = md.code(str(param.name).upper())
    return (
        names,
        _param_type(param),
        _param_default(param),
        md.text(getattr(param, "help", "") or ""),
    )


def _param_type(param: Any) -> str:
    kind = param.type
    if getattr(param, "is_flag", False):
        text = "flag"
    elif getattr(kind, "choices", None):
        text = md.code(" | ".join(str(choice) for choice in kind.choices))
    elif hasattr(kind, "min_open"):  # an int or float range
        base = "integer" if "int" in str(getattr(kind, "name", "")) else "number"
        limits = []
        if kind.min is not None:
            limits.append(f"{'>' if kind.min_open else '≥'} {kind.min}")
        if kind.max is not None:
            limits.append(f"{'&lt;' if kind.max_open else '≤'} {kind.max}")
        text = f"{base} {', '.join(limits)}".strip()
    else:
        names = {"str": "text", "int": "integer", "float": "number", "boolean": "boolean"}
        raw = str(getattr(kind, "name", "") or type(kind).__name__.removeprefix("Typer")).lower()
        text = names.get(raw, raw)
    if getattr(param, "multiple", False):
        text += ", repeatable"
    return text


def _param_default(param: Any) -> str:
    if param.required:
        return "required"
    default = param.default
    if getattr(param, "is_flag", False) and not param.secondary_opts:
        return "on" if default else "off"
    if default is None or default == () or default == []:
        return ""
    if isinstance(default, enum.Enum):
        default = default.value
    return md.code(str(default))
