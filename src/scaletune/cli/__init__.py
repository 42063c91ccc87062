"""Command-line interface."""

from scaletune.cli._app import app, main

__all__ = ["app", "main"]
