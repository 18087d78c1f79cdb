"""The import layering (docs/concepts/architecture.md) is a rule: import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import vtb_agents

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    # in its own process: import-linter's CLI reconfigures logging, which would mute the other tests' loggers
    check = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                            "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "2 kept, 0 broken" in check.stdout


def test_every_top_level_package_and_module_has_a_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layered = {name.strip() for contract in config["contracts"] if contract["type"] == "layers"
               for layer in contract["layers"] for name in layer.split("|")}
    package = Path(vtb_agents.__file__).parent
    top_level = {p.stem if p.is_file() else p.name for p in package.iterdir()
                 if (p.suffix == ".py" and not p.name.startswith("__")) or (p / "__init__.py").is_file()}
    assert top_level == layered


def test_the_docs_map_names_every_top_level_package_and_module():
    page = (ROOT / "docs" / "concepts" / "architecture.md").read_text()
    block = page[page.index("```text\nvtb_agents/"):].split("```")[1]
    named = {line.split()[0].rstrip("/").removesuffix(".py") for line in block.splitlines()[2:]
             if line.startswith("  ") and not line.startswith("   ")}
    named |= {word.removesuffix(".py") for line in block.splitlines() for word in line.split() if word.endswith(".py")}
    package = Path(vtb_agents.__file__).parent
    top_level = {p.stem if p.is_file() else p.name for p in package.iterdir()
                 if (p.suffix == ".py" and not p.name.startswith("__")) or (p / "__init__.py").is_file()}
    assert top_level <= named, sorted(top_level - named)
    assert named <= top_level, sorted(named - top_level)


def test_no_import_is_ignored_and_no_shim_module_remains():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = config["contracts"]
    assert {contract["type"] for contract in contracts} == {"layers", "acyclic_siblings"}
    assert [contract.get("ignore_imports", []) for contract in contracts] == [[]] * len(contracts)
    package = Path(vtb_agents.__file__).parent
    old_paths = ["agents.py", "graphs/deadline.py", "graphs/grading.py", "graphs/retry.py", "graphs/studio.py",
                 "tools/sandbox/__init__.py", "tasks/sample_suite.py", "tasks/sample_scenes/__init__.py"]
    assert [path for path in old_paths if (package / path).exists()] == []
    assert "sys.modules[" not in (package / "runner" / "__init__.py").read_text()  # no aliased old submodules


def import_graph() -> Any:
    """grimp's graph of every import between the package's modules (what import-linter checks), counting
    imports inside functions and under ``TYPE_CHECKING`` too."""
    import grimp

    return grimp.build_graph("vtb_agents", cache_dir=None)


def contract_layers() -> list[set[str]]:
    """The layers contract of pyproject.toml, top first, each layer as the set of its members."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [contract["layers"] for contract in config["contracts"] if contract["type"] == "layers"]
    return [{name.strip() for name in layer.split("|")} for layer in layers]


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node of the graph ``edges`` (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle_of_modules() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert strongly_connected(edges) == [["a", "b", "c"], ["e", "e2"]]


def test_no_module_imports_itself_through_others() -> None:
    """No import circle between any two modules (a package's ``__init__`` and its modules included),
    not only between packages (which the layers contract forbids)."""
    graph = import_graph()
    edges = {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    assert len(edges) > 150 and "vtb_agents.sandbox.local" in edges["vtb_agents.sandbox"]
    assert strongly_connected(edges) == []


def tight_layers(graph: Any, members: set[str]) -> list[set[str]]:
    """The layering the imports between ``members`` (top-level packages and modules) really make, top
    first: each member sits one layer above the highest member it imports, so every member of a layer
    imports something from the layer right below it (the bottom layer imports none of them)."""
    def member(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in members else None

    imports: dict[str, set[str]] = {name: set() for name in members}
    for module in graph.modules:
        importer = member(module)
        for imported in graph.find_modules_directly_imported_by(module):
            target = member(imported)
            if importer and target and target != importer:
                imports[importer].add(target)
    height: dict[str, int] = {}

    def level(name: str) -> int:
        if name not in height:
            height[name] = 1 + max((level(target) for target in imports[name]), default=-1)
        return height[name]

    for name in members:
        level(name)
    return [{name for name in members if height[name] == h} for h in sorted(set(height.values()), reverse=True)]


def written(layers: list[set[str]]) -> str:
    """``layers`` as pyproject.toml and the docs write them (siblings sorted)."""
    return "\n".join(" | ".join(sorted(layer)) for layer in layers)


def test_the_layer_chain_lists_only_real_dependencies() -> None:
    """Each layer of the contract imports something from the layer right below it; members that do not
    import each other and sit on the same layer are siblings (``a | b``). So the chain claims no
    dependency the code does not have (and pyproject.toml's order is the one the imports make)."""
    layers = contract_layers()
    real = tight_layers(import_graph(), set().union(*layers))
    assert layers == real, f"the imports make this chain (top first):\n{written(real)}"


def docs_chain() -> list[set[str]]:
    """The layer chain docs/concepts/architecture.md shows (its ``text`` block after "**Layers.**")."""
    page = (ROOT / "docs/concepts/architecture.md").read_text()
    block = page[page.index("**Layers.**"):].split("```text\n", 1)[1].split("```", 1)[0]
    return [{name.strip() for name in line.split("|")} for line in block.splitlines() if line.strip()]


def test_the_docs_show_the_contracts_chain() -> None:
    assert docs_chain() == contract_layers(), f"write the docs' chain as:\n{written(contract_layers())}"


def names_lists(path: Path) -> list[tuple[tuple[str, ...], str]]:
    """The module-level constants of ``path`` that are a literal tuple, set or frozenset of two or more
    strings (a list of names: categories, keys, tools), as (sorted names, where)."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "frozenset":
            value = value.args[0] if value.args else None
        if isinstance(value, (ast.Tuple, ast.Set)) and len(value.elts) > 1 and all(
                isinstance(item, ast.Constant) and isinstance(item.value, str) for item in value.elts):
            names = tuple(sorted(str(item.value) for item in value.elts))  # type: ignore[attr-defined]
            found.append((names, f"{path.relative_to(ROOT)}:{node.lineno}"))
    return found


def test_no_list_of_names_is_written_twice() -> None:
    """A list of names (the task categories, the keys of an image block's type) is written once, on the
    lowest layer that uses it, and imported from there."""
    package = Path(vtb_agents.__file__).parent
    places: dict[tuple[str, ...], list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for names, where in names_lists(path):
            places.setdefault(names, []).append(where)
    assert len(places) > 20
    assert {names: where for names, where in places.items() if len(where) > 1} == {}
