"""The layering of DESIGN.md §8, checked by `pytest` alone.

- the import-linter contracts in pyproject.toml (layers, no cycles, core never
  imports the plugins) hold;
- no import circle among the modules of core/, plugins/ and contrib_jobs/, counting
  every import: lazy ones in functions and ``if TYPE_CHECKING:`` ones included;
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
from collections.abc import Collection, Iterator
from pathlib import Path

import grimp

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

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


def test_the_contracts_ignore_nothing_and_keep_the_plugins_out_of_core() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    assert [c["id"] for c in contracts if c.get("ignore_imports")] == []
    forbidden = [
        (c["source_modules"], c["forbidden_modules"]) for c in contracts if c["type"] == "forbidden"
    ]
    assert (["jobsched"], ["jobsched_plugins"]) in forbidden


# ── no import circles, lazy and TYPE_CHECKING imports included ─────────
#: The source roots (DESIGN.md section 2), each holding one top-level package.
SOURCE_ROOTS = ("core", "plugins", "contrib_jobs")


def source_modules(roots: list[Path]) -> dict[str, Path]:
    """Every module under `roots` by dotted name (a package by its ``__init__.py``)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imported_modules(module: str, path: Path, known: Collection[str]) -> set[str]:
    """The modules among `known` that `module` imports anywhere in its file.

    Every ``import`` and ``from ... import`` counts, at any depth (in a function,
    under ``if TYPE_CHECKING:``); relative imports are resolved. ``from p import
    name`` is an import of ``p.name`` when that is a module, else of ``p``.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                named.add(submodule if submodule in known else origin)
    imported = set()
    for name in named:
        while name and name not in known:  # an object's module: `import a.b.c` of a.b
            name = name.rpartition(".")[0]
        if name and name != module:
            imported.add(name)
    return imported


def import_circles(roots: list[Path]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    modules = source_modules(roots)
    graph = {m: sorted(imported_modules(m, p, modules)) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return sorted(circles)


def test_the_circle_scan_sees_what_it_should(tmp_path: Path) -> None:
    # Lazy, TYPE_CHECKING and relative imports all count; a name imported from
    # a module is an import of that module.
    files = {
        "pkg/__init__.py": "from .a import A\n",
        "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        "pkg/b.py": "def f():\n    from pkg import a\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "def g():\n    import pkg.sub.d\n",
        "pkg/sub/d.py": "from ..sub.c import g\nfrom . import e\n",
        "pkg/sub/e.py": "import os\nfrom pkg.b import f\n",
        "other/__init__.py": "from pkg.sub import e\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert import_circles([tmp_path]) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d"]]


def test_no_import_circles_counting_lazy_and_type_checking_imports() -> None:
    assert import_circles([ROOT / top for top in SOURCE_ROOTS]) == []


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
