# `make demo`, `make lint` and `make test` each set up .venv (from the system python3) if needed, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_OUT ?= runs/demo
DOCS_OUT ?= site
# mermaid.js draws the graph diagrams of the docs site offline (Material would fetch it from a CDN).
MERMAID_VERSION := 11.12.2
MERMAID_JS := $(VENV)/share/mermaid/mermaid.min.js

.PHONY: demo test test-fast lint imports install clean sample mutation docs bench-inspect-venv bench-rate-limits

# constraints.txt pins every dependency to the versions the tests and the shipped sample suite were
# made with (Pillow's font rendering and trafilatura's extraction shape the suite's files).
$(STAMP): pyproject.toml constraints.txt
	@# bubblewrap gives the code sandbox full isolation; without it the sandbox falls back (see docs/concepts/sandbox.md).
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; } \
		|| echo "warning: bubblewrap (bwrap) is not installed: the sandbox will use its fallback isolation"
	@# Chromium renders the HTML report in a test (headless screenshot).
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
		|| echo "warning: chromium is not installed: the report rendering test will be skipped"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,docs,hf,search,e2b,ray]'
	@# The docs' mermaid.js, the pinned release from the npm registry (only its one bundled file is kept).
	@mkdir -p $(dir $(MERMAID_JS)) && { command -v npm >/dev/null && cd $(dir $(MERMAID_JS)) \
		&& npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null \
		&& tar xzf mermaid-$(MERMAID_VERSION).tgz --strip-components=2 package/dist/mermaid.min.js \
		&& rm mermaid-$(MERMAID_VERSION).tgz; } \
		|| echo "warning: npm could not fetch mermaid $(MERMAID_VERSION): make docs will fail (install npm)"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	rm -rf $(DEMO_OUT)
	$(BIN)/vtb run --tasks sample --model replay --judge rule --out $(DEMO_OUT)

# The documentation site (docs/, mkdocs.yml) into $(DOCS_OUT)/, --strict: a broken link or reference fails the build.
# The build (scripts/docs_hooks.py) makes the report/compare screenshots from a `make demo`-style run in a temporary
# folder, draws the graphs from the code (LangGraph's Mermaid), the CLI reference from the click commands and the API
# reference from the docstrings; the site loads nothing from the network.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(DOCS_OUT)

# Two pytest workers (pytest-xdist), each taking one test at a time, the costliest first (the tests of a file that share
# a module fixture go together: tests/conftest.py; docs/development.md, "Testing", has the
# measured times); PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder
test: $(STAMP)
	$(PYTEST) --durations=20

test-fast: $(STAMP)
	$(PYTEST) -m "not browser and not cluster and not slow"

# ruff's linter, mypy and the import layering (import-linter) over the code (settings in pyproject.toml); mypy also
# checks the sample suite's generator (scripts/, outside the package). `ruff format --check` is not run: the code
# keeps its hand-aligned continuation lines, which the formatter would rewrite in ~170 files at once.
lint: $(STAMP)
	$(BIN)/ruff check vtb_agents tests bench examples scripts
	$(BIN)/mypy
	$(BIN)/mypy scripts/sample_suite.py scripts/sample_scenes
	$(BIN)/lint-imports --no-cache

# The import layering (pyproject.toml [tool.importlinter], docs/concepts/architecture.md); also run by the tests.
imports: $(STAMP)
	$(BIN)/lint-imports --no-cache

# Mutation testing of the scoring and outcome modules ([tool.mutmut] in pyproject.toml; docs/development.md).
# Minutes of CPU: not part of `make test`. Survivors are listed by `mutmut results`, shown by `mutmut show NAME`.
mutation: $(STAMP)
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

# The sample suite's generator is a development script outside the package; it rewrites vtb_agents/tasks/sample/.
sample: $(STAMP)
	$(BIN)/python scripts/sample_suite.py

# The rate-limit bench's rival, inspect_ai, in an environment of its own (never a dependency of the package):
# bench/inspect_rate_limits.py runs in it. The version is the one BENCHMARKS.md "Rate limits" measured.
INSPECT_VENV := bench/.venv-inspect
INSPECT_AI_VERSION := 0.3.285
bench-inspect-venv: $(INSPECT_VENV)/.installed-stamp
$(INSPECT_VENV)/.installed-stamp:
	test -x $(INSPECT_VENV)/bin/python || $(PYTHON) -m venv $(INSPECT_VENV)
	$(INSPECT_VENV)/bin/python -m pip install --quiet inspect_ai==$(INSPECT_AI_VERSION) openai
	touch $@

# vtb run, inspect_ai and a hand-written openai loop against one rate-limited server (BENCHMARKS.md "Rate limits").
bench-rate-limits: $(STAMP) $(INSPECT_VENV)/.installed-stamp
	nice -n 10 $(BIN)/python bench/rate_limits.py --concurrency 8 32 128

clean:
	rm -rf $(VENV) $(INSPECT_VENV) runs mutants site .pytest_cache .mypy_cache .ruff_cache *.egg-info
