"""The import layering (docs/concepts/architecture.md) is a rule: import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import vtb_agents

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    # in its own process: import-linter's CLI reconfigures logging, which would mute the other tests' loggers
    check = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                            "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "1 kept, 0 broken" in check.stdout


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
    assert [contract.get("ignore_imports", []) for contract in config["contracts"]] == [[]]
    package = Path(vtb_agents.__file__).parent
    old_paths = ["agents.py", "graphs/deadline.py", "graphs/grading.py", "graphs/retry.py", "graphs/studio.py",
                 "tools/sandbox/__init__.py", "tasks/sample_suite.py", "tasks/sample_scenes/__init__.py"]
    assert [path for path in old_paths if (package / path).exists()] == []
    assert "sys.modules[" not in (package / "runner" / "__init__.py").read_text()  # no aliased old submodules
