"""Commands that plugins add: the `CommandLine` each ``jobsched_register_commands`` gets."""

from __future__ import annotations

import argparse
import re
from typing import Any

from .. import DISABLE_PLUGINS_ENV, PluginError, PluginManager
from ..hookspecs import CommandHandler

#: What a command name may look like: ``jobsched NAME`` stays one plain word.
COMMAND_NAME = re.compile(r"[a-z0-9][a-z0-9-]*\Z")


class PluginCommands:
    """Every plugin's commands, added to the ``jobsched`` parser's subcommands.

    A name is either jobsched's own or one plugin's: a second claim fails the
    plugin that makes it, naming the owner. A plugin whose hook raises keeps
    its commands in ``--help``, but running one reports the failure (exit
    code 2) instead of running a half-registered command.
    """

    def __init__(self, subparsers: Any, plugins: PluginManager) -> None:
        self._subparsers = subparsers
        self.plugins = plugins
        self._builtin = frozenset(subparsers.choices)
        self._owner: dict[str, str] = {}  # command -> the plugin that added it
        self._parsers: dict[str, list[argparse.ArgumentParser]] = {}  # plugin -> its parsers
        #: Plugins whose ``jobsched_register_commands`` raised, with the error.
        self.failures: dict[str, str] = {}

    def add_all(self) -> None:
        """Call every plugin's hook; disarm the commands of the ones that raised."""
        self.failures = self.plugins.register_commands(lambda plugin: _PluginView(self, plugin))
        for plugin, failure in self.failures.items():
            report = _Failed(failure_line(plugin, failure))
            for parser in self._parsers.get(plugin, ()):
                parser.set_defaults(handler=report)

    def add(
        self,
        plugin: str,
        name: str,
        *,
        help: str,
        handler: CommandHandler,
        description: str | None,
    ) -> argparse.ArgumentParser:
        if not isinstance(name, str) or not COMMAND_NAME.match(name):
            raise PluginError(f"command name {name!r} is not lowercase letters, digits and dashes")
        if not callable(handler):
            raise PluginError(f"command {name!r}: handler {handler!r} is not callable")
        if name in self._builtin:
            raise PluginError(f"command {name!r} is one of jobsched's own")
        owner = self._owner.get(name)
        if owner is not None:
            raise PluginError(
                f"command {name!r} is already added by plugin "
                f"{self.plugins.describe_plugin(owner)}; disable one of them, e.g. "
                f"{DISABLE_PLUGINS_ENV}={plugin}"
            )
        parser: argparse.ArgumentParser = self._subparsers.add_parser(
            name, help=f"{help} (plugin {plugin})", description=description or help
        )
        parser.set_defaults(handler=_PluginHandler(name, plugin, handler))
        self._owner[name] = plugin
        self._parsers.setdefault(plugin, []).append(parser)
        return parser


def failure_line(plugin: str, failure: str) -> str:
    return (
        f"plugin {plugin!r} failed to add its commands: {failure} - "
        f"disable it with {DISABLE_PLUGINS_ENV}={plugin}"
    )


class _PluginView:
    """The `jobsched.hookspecs.CommandLine` one plugin's hook receives."""

    def __init__(self, commands: PluginCommands, plugin: str) -> None:
        self._commands = commands
        self._plugin = plugin

    @property
    def plugins(self) -> PluginManager:
        return self._commands.plugins

    def add_command(
        self,
        name: str,
        *,
        help: str,
        handler: CommandHandler,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        return self._commands.add(
            self._plugin, name, help=help, handler=handler, description=description
        )


class _PluginHandler:
    """A plugin's ``handler(args)`` in the shape of jobsched's own, ``(args, plugins)``."""

    def __init__(self, name: str, plugin: str, handler: CommandHandler) -> None:
        self._name = name
        self._plugin = plugin
        self._handler = handler

    def __call__(self, args: argparse.Namespace, plugins: PluginManager) -> int:
        code = self._handler(args)
        if code is None:
            return 0
        if not isinstance(code, int) or isinstance(code, bool):
            raise TypeError(
                f"command {self._name!r} of plugin {self._plugin!r} returned {code!r}, "
                "not an exit code (an int, or None for 0)"
            )
        return code


class _Failed:
    """The handler of a command whose plugin failed: says so (exit code 2)."""

    def __init__(self, message: str) -> None:
        self._message = message

    def __call__(self, args: argparse.Namespace, plugins: PluginManager) -> int:
        raise PluginError(self._message)
