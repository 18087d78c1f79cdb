"""Every third-party module the package imports comes from a dependency pyproject.toml declares:
imports that run when a module loads from the core dependencies, imports inside functions or
behind an ``ImportError`` guard from the core or an extra. And every module of the package imports.

Why a static check rather than a fresh environment per CI run: building a virtualenv from the
declared dependencies needs the network (no test may use it) and would re-install ~1 GB of wheels
on every `make test`. Mapping each import through ``importlib.metadata.packages_distributions()``
to the distribution that provides it gives the same answer for imports, offline, in a second.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE = PROJECT / "vtb_agents"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    return {normalize(re.match(r"[A-Za-z0-9._-]+", r).group(0)) for r in requirements}


def declared() -> tuple[set[str], set[str]]:
    """(core distributions, distributions of any extra but dev)."""
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return (requirement_names(project["dependencies"]),
            requirement_names([r for name, reqs in extras.items() if name != "dev" for r in reqs]))


def _guards_import_error(node: ast.Try) -> bool:
    names = {n.id for h in node.handlers if h.type is not None
             for n in ast.walk(h.type) if isinstance(n, ast.Name)}
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def imports(tree: ast.Module) -> list[tuple[str, bool, int]]:
    """(top-level module, runs at module load unguarded, line) for each absolute import."""
    found: list[tuple[str, bool, int]] = []

    def visit(nodes: list[ast.stmt], at_load: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend((a.name.split(".")[0], at_load, node.lineno) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module.split(".")[0], at_load, node.lineno))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, False)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, at_load)
            elif isinstance(node, ast.If):
                checking = "TYPE_CHECKING" in ast.unparse(node.test)
                visit(node.body, at_load and not checking)
                visit(node.orelse, at_load)
            elif isinstance(node, ast.Try):
                visit(node.body, at_load and not _guards_import_error(node))
                for part in (*(h.body for h in node.handlers), node.orelse, node.finalbody):
                    visit(part, at_load)
            elif isinstance(node, (ast.With, ast.For, ast.While)):
                visit(node.body, at_load)
    visit(tree.body, True)
    return found


def test_every_imported_distribution_is_declared():
    core, extras = declared()
    providers = metadata.packages_distributions()
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for module, at_load, line in imports(ast.parse(path.read_text(encoding="utf-8"))):
            if module in sys.stdlib_module_names or module in {"vtb_agents", "__future__"}:
                continue
            dists = {normalize(d) for d in providers.get(module, [])}
            where = f"{path.relative_to(PROJECT)}:{line} imports {module}"
            if not dists:
                problems.append(f"{where}, which no installed distribution provides")
            elif at_load and not dists & core:
                problems.append(f"{where} when it loads, but none of {sorted(dists)} is a core dependency")
            elif not dists & (core | extras):
                problems.append(f"{where}, but none of {sorted(dists)} is declared (core or extra)")
    assert not problems, "\n".join(problems)


def test_the_checker_sees_guarded_and_unguarded_imports():
    tree = ast.parse("import a\ntry:\n    import b\nexcept ImportError:\n    b = None\n"
                     "def f():\n    import c\nif TYPE_CHECKING:\n    import d\n")
    assert imports(tree) == [("a", True, 1), ("b", False, 3), ("c", False, 7), ("d", False, 9)]


def test_every_module_of_the_package_imports():
    code = ("import pkgutil, importlib, vtb_agents\n"
            "names = [m.name for m in pkgutil.walk_packages(vtb_agents.__path__, 'vtb_agents.')\n"
            "         if m.name not in ('vtb_agents.__main__',)]\n"
            "for name in names:\n    importlib.import_module(name)\n"
            "print(len(names))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=PROJECT)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 50
