"""A backend's own options, declared once: a frozen dataclass whose fields carry their click
option. The backend's command takes the options built from it (`click_options`), and the
Request carries an instance (`Request.options`), so what only nsys or ncu needs reaches only it.

Example:
    >>> @dataclass(frozen=True)
    ... class MineOptions(BackendOptions):
    ...     mine: str | None = tool_path("mine")
    ...     depth: int = option(3, "--depth", type=int, show_default=True, help="How deep.")
    >>> MineOptions.build({"depth": 5}).depth
    5
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

CLI = "cli"  # a field's metadata key: (decls, click keyword arguments)
TOOL_PATH = "tool_path"  # the field that holds the path of the backend's tool (--nsys PATH)


def option(default: Any, *decls: str, **click_kw: Any) -> Any:
    """A field of a backend's options with its click option (`decls`: the flags; the field's name
    is the parameter's). A `multiple=True` option's value is a tuple."""
    return field(default=default, metadata={CLI: (decls, click_kw)})


def tool_path(tool: str, env: str | None = None) -> Any:
    """The field for `--<tool> PATH`: the tool's explicit path (ToolBackend finds it here)."""
    help_ = f"Path to {tool} (else ${env or 'GPROF_' + tool.upper()}, PATH, install places)."
    return field(default=None, metadata={CLI: ((f"--{tool}",), {"help": help_}), TOOL_PATH: True})


def reuse(owner: type, name: str, **click_kw: Any) -> Any:
    """Field `name` of another backend's Options, declared once there: the same default, flags
    and metadata, its click keywords overridden by `click_kw` (a help that speaks of this command)."""
    f = owner.__dataclass_fields__[name]
    decls, kw = f.metadata[CLI]
    return field(default=f.default, metadata={**f.metadata, CLI: (decls, {**kw, **click_kw})})


@dataclass(frozen=True)
class BackendOptions:
    """A backend's own options: none. A backend with options subclasses it (frozen), each field
    declared with option() or tool_path()."""

    def validate(self) -> None:
        """Raise UsageError for a value the backend cannot take; nothing by default."""

    def tool_path(self) -> str | None:
        """The value of the field declared with tool_path(), or None."""
        for f in fields(self):
            if f.metadata.get(TOOL_PATH):
                return getattr(self, f.name)
        return None

    def to_json(self) -> dict[str, Any]:
        """Field -> value, a tuple as a list (the request record in manifest.json)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def build(cls, values: dict[str, Any]) -> BackendOptions:
        """An instance from field -> value (a request record's or a command's, lists as tuples);
        a field not given keeps its default."""
        kw = {}
        for f in fields(cls):
            if f.name in values:
                v = values[f.name]
                multiple = (f.metadata.get(CLI) or ((), {}))[1].get("multiple")
                kw[f.name] = tuple(v or ()) if multiple and isinstance(v, (list, tuple)) else v
        return cls(**kw)

    @classmethod
    def click_options(
        cls,
        tool_paths_only: bool = False,
        tool_path: bool = True,
        only: tuple[str, ...] | None = None,
        skip: tuple[str, ...] = (),
    ) -> list:
        """The click options of the backend's command, one per declared field, in their order
        (`tool_paths_only`: only --<tool> PATH, as `all` takes it; `tool_path` False: all but it,
        where a command sets --<tool> PATH among options it shares with another; `only`, `skip`:
        those fields alone, or all but them, where two commands share some of them)."""
        import click

        out = []
        for f in fields(cls):
            decls, kw = f.metadata.get(CLI) or ((), None)
            is_path = bool(f.metadata.get(TOOL_PATH))
            if kw is None or (tool_paths_only and not is_path) or (not tool_path and is_path):
                continue
            if (only is not None and f.name not in only) or f.name in skip:
                continue
            kw = dict(kw)
            if not kw.get("multiple") and f.default is not MISSING:
                kw.setdefault("default", f.default)
            out.append(click.option(*decls, f.name, **kw))
        return out


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v
