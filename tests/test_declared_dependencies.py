"""Every third-party module the package imports comes from a dependency pyproject.toml declares:
imports that run when a module loads from the core dependencies, imports inside functions from the
core or an extra (imports behind an ``ImportError`` guard are optional by construction: any may be
missing). And every module of the package imports.

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

import pytest

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


def imports(tree: ast.Module) -> list[tuple[str, str, int]]:
    """(top-level module, when, line) for each absolute import; ``when`` is "load" (runs when the
    module loads), "lazy" (inside a function or under TYPE_CHECKING) or "guarded" (ImportError caught)."""
    found: list[tuple[str, str, int]] = []

    def visit(nodes: list[ast.stmt], when: str) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend((a.name.split(".")[0], when, node.lineno) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module.split(".")[0], when, node.lineno))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, "lazy" if when == "load" else when)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, when)
            elif isinstance(node, ast.If):
                checking = "TYPE_CHECKING" in ast.unparse(node.test)
                visit(node.body, "lazy" if checking and when == "load" else when)
                visit(node.orelse, when)
            elif isinstance(node, ast.Try):
                visit(node.body, "guarded" if _guards_import_error(node) else when)
                for part in (*(h.body for h in node.handlers), node.orelse, node.finalbody):
                    visit(part, when)
            elif isinstance(node, (ast.With, ast.For, ast.While)):
                visit(node.body, when)
    visit(tree.body, "load")
    return found


def test_every_imported_distribution_is_declared():
    core, extras = declared()
    providers = metadata.packages_distributions()
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for module, when, line in imports(ast.parse(path.read_text(encoding="utf-8"))):
            if module in sys.stdlib_module_names or module in {"vtb_agents", "__future__"} or when == "guarded":
                continue
            if (path.parent / f"{module}.py").is_file():  # a sibling, imported by name in a script (sandbox/zygote.py)
                continue
            dists = {normalize(d) for d in providers.get(module, [])}
            where = f"{path.relative_to(PROJECT)}:{line} imports {module}"
            if not dists:
                problems.append(f"{where}, which no installed distribution provides")
            elif when == "load" and not dists & core:
                problems.append(f"{where} when it loads, but none of {sorted(dists)} is a core dependency")
            elif not dists & (core | extras):
                problems.append(f"{where}, but none of {sorted(dists)} is declared (core or extra)")
    assert not problems, "\n".join(problems)


def test_the_checker_sees_guarded_and_unguarded_imports():
    tree = ast.parse("import a\ntry:\n    import b\nexcept ImportError:\n    b = None\n"
                     "def f():\n    import c\n    try:\n        import e\n    except ImportError:\n        pass\n"
                     "if TYPE_CHECKING:\n    import d\n")
    assert imports(tree) == [("a", "load", 1), ("b", "guarded", 3), ("c", "lazy", 7), ("e", "guarded", 9),
                             ("d", "lazy", 13)]


@pytest.mark.slow
def test_every_module_of_the_package_imports():
    code = ("import pkgutil, importlib, vtb_agents\n"
            "names = [m.name for m in pkgutil.walk_packages(vtb_agents.__path__, 'vtb_agents.')\n"
            "         if m.name not in ('vtb_agents.__main__',)]\n"
            "for name in names:\n    importlib.import_module(name)\n"
            "print(len(names))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=PROJECT)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 50
