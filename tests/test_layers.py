"""The layering of DESIGN.md §8, checked by `pytest` alone.

- the import-linter contracts in pyproject.toml (layers, no cycles) hold;
- applications (cli, jobfile, testing, worker, web, integrations) and plugins import only public
  modules of jobsched;
- no module reads or writes another module's private attributes.

(tests/test_packaging.py checks the kernel's third-party imports.)
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]

#: Modules that use jobsched as a library: they may use its public names only.
APPLICATIONS = (
    "jobsched.cli",
    "jobsched.jobfile",
    "jobsched.testing",
    "jobsched.worker",
    "jobsched._pytest_plugin",
    "jobsched.web",
    "jobsched.integrations",
)
PLUGIN_PACKAGES = ("jobsched_plugins", "jobsched_contrib")


@functools.cache
def import_graph() -> grimp.ImportGraph:
    return grimp.build_graph("jobsched", *PLUGIN_PACKAGES, include_external_packages=True)


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _direct_imports(module: str) -> Iterator[str]:
    yield from sorted(import_graph().find_modules_directly_imported_by(module))


# ── import-linter ──────────────────────────────────────────────────────
def test_the_import_contracts_in_pyproject_hold() -> None:
    # The same command as .ci/run; --no-cache keeps the work tree clean.
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
            "--no-logo",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ── applications and plugins use public modules only ───────────────────
def _private_owner(module: str) -> str | None:
    """The package whose private module `module` is (None when it is public).

    ``jobsched._store`` belongs to ``jobsched``; ``jobsched.cli._run`` to ``jobsched.cli``.
    """
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


#: jobsched.testing is the public face of the virtual clock, its own implementation.
PRIVATE_IMPORTS_ALLOWED = frozenset({"jobsched.testing -> jobsched._virtual_clock"})


def private_module_imports() -> set[str]:
    """Every import by an application or plugin of a module private to someone else."""
    graph = import_graph()
    users = [m for m in graph.modules if _within(m, APPLICATIONS + PLUGIN_PACKAGES)]
    found = set()
    for user in users:
        for imported in _direct_imports(user):
            owner = _private_owner(imported)
            if owner is None or not _within(imported, ("jobsched",)):
                continue
            # A package's own private modules are its business; jobsched's are the kernel's.
            if owner != "jobsched" and _within(user, (owner,)):
                continue
            found.add(f"{user} -> {imported}")
    return found - PRIVATE_IMPORTS_ALLOWED


def test_applications_and_plugins_import_only_public_modules() -> None:
    assert sorted(private_module_imports()) == []


# ── private attributes stay in their module ────────────────────────────
#: Private-looking names that are someone's public API, or a justified peek.
PRIVATE_ATTRIBUTES_ALLOWED = {
    # namedtuple's public methods are underscored only to keep clear of field names.
    "_replace": "*",
    "_asdict": "*",
    "_fields": "*",
    "_make": "*",
    # asyncio has no public "is the loop idle?"; VirtualClock.settle reads CPython's
    # run queue when it has one and falls back to a fixed number of passes.
    "_ready": "core/jobsched/_virtual_clock.py",
    # os's public "exit now, no cleanup": a forked child, a worker its watchdog ends.
    "_exit": "*",
    # The documented way to read another thread's stack: the loop watchdog logs the loop's.
    "_current_frames": "core/jobsched/worker.py",
}

SCANNED = ("core", "plugins")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_private_names(tree: ast.Module) -> set[str]:
    """Private names this module defines: on self/cls, in a class body, __slots__, defs.

    An attribute the module sets on a function or class it defines (a marker
    on a wrapper) is its own too.
    """
    defined = {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    names = set(defined)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    names.add(sub.id)
                elif (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id in {"self", "cls", *defined}
                ):
                    names.add(sub.attr)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            names.update(
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
    return {n for n in names if _is_private(n)}


def _allowed(name: str, path: str) -> bool:
    where = PRIVATE_ATTRIBUTES_ALLOWED.get(name)
    return where is not None and where in ("*", path)


def private_attribute_access(path: Path) -> Iterator[str]:
    """``x._name`` (x not self/cls/super()), ``getattr(x, "_name")`` and
    ``from module import _name`` where the module does not define ``_name``."""
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    own = _own_private_names(tree)
    in_line_order = sorted(
        ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))
    )
    for node in in_line_order:
        name: str | None = None
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
                continue
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
        ):
            name = node.args[1].value
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            # (`from . import _submodule` is a module import: import-linter's business.)
            for alias in node.names:
                if _is_private(alias.name) and not _allowed(alias.name, rel):
                    module = "." * node.level + node.module
                    yield f"{rel}:{node.lineno}: from {module} import {alias.name}"
            continue
        if name is None or name in own or _allowed(name, rel):
            continue
        yield f"{rel}:{node.lineno}: {ast.unparse(node)}"


def private_attribute_violations() -> list[str]:
    return [
        problem
        for top in SCANNED
        for path in sorted((ROOT / top).rglob("*.py"))
        for problem in private_attribute_access(path)
    ]


def test_the_private_attribute_scan_sees_what_it_should(tmp_path: Path) -> None:
    # The scan itself, on a module of known faults and known innocents.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from ._job import _qualname\n"
        "from . import _private_module\n"
        "class Mine:\n"
        "    __slots__ = ('_slot',)\n"
        "    def __init__(self, other):\n"
        "        self._mine = 1\n"
        "        self._slot = other._theirs\n"
        "        super()._hook()\n"
        "        getattr(other, '_hidden', None)\n"
        "        other._mine, other.__dict__, other.public\n"
        "        row._replace(a=1)\n"
        "def wrapper():\n"
        "    pass\n"
        "wrapper._marker = True\n"
        "print(wrapper._marker)\n",
        encoding="utf-8",
    )
    found = [p.split(": ", 1)[1] for p in private_attribute_access(sample)]
    assert sorted(found) == sorted(
        [
            "from ._job import _qualname",
            "other._theirs",
            "getattr(other, '_hidden', None)",
        ]
    )


def test_no_module_reads_another_modules_private_attributes() -> None:
    assert private_attribute_violations() == []
