# Set-up and checks. `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup demo test native browser bench bench-serve score catalog catalog-full fuzz mutate
setup: $(BIN)/diag

$(BIN)/diag: pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

demo: setup
	$(BIN)/diag analyze samples/qwen36-27b-mtp-extra-buffer.log --smi samples/rtx-pro-6000-smi.txt; test $$? -le 1

# Debian's Chromium for the browser tests of the HTML report
browser:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; }

# two processes (pytest-xdist); TEST_JOBS=0 runs in one, TEST_JOBS=auto on every core. worksteal:
# xdist's default hands each worker a quarter of the suite up front, and the first quarter in
# file order holds the slow subprocess, server and Ray tests, so one worker ran ~35 s after the other
TEST_JOBS ?= 2
# bytecode: the package is compiled once up front and pytest keeps its rewritten test modules, even
# where the environment sets PYTHONDONTWRITEBYTECODE (every subprocess test otherwise compiled diag
# again from source: 0.29 s against 0.15 s a run); only __pycache__ folders are written
# the fast reader's C classifier (diag/_lines.c) rebuilt where it changed; where a C compiler is, the
# tests require it (tests/test_native.py), so a C file that no longer builds fails rather than
# passing on the polars fallback
native: setup
	$(BIN)/python setup.py -q build_ext --inplace 2>&1 | grep -v -e BetaConfiguration -e 'warnings.warn' || true
REQUIRE_NATIVE := $(shell command -v cc >/dev/null 2>&1 && echo 1)

test: setup browser native
	$(BIN)/python -m compileall -q diag >/dev/null
	PYTHONDONTWRITEBYTECODE= DIAG_REQUIRE_BROWSER=1 DIAG_REQUIRE_NATIVE=$(REQUIRE_NATIVE) $(BIN)/python -m pytest $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist worksteal)

bench: setup
	$(BIN)/python benchmarks/run.py

# diag serve under concurrent load (requests/s, p50/p99, memory)
bench-serve: setup
	$(BIN)/python benchmarks/serve_bench.py

# hostile input at length (issue 10): thousands of property examples, every pattern at 200 KB,
# and the large inputs (bombs, event-dense logs) measured against the Done-when bounds; every log of
# tests/data through every reader and every corpus line through the literal precheck (the suite
# takes a third and a half of them)
fuzz: setup
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q tests/test_properties.py
	DIAG_ALL_READER_LOGS=1 $(BIN)/python -m pytest -q -n 2 tests/test_scan.py -k test_same_report_through_both_readers
	DIAG_ALL_PRECHECK_LINES=1 $(BIN)/python -m pytest -q -n 2 tests/test_linear.py -k test_the_literal_precheck_never_hides_a_match
	LINEAR_KB=200 $(BIN)/python -m pytest -q tests/test_linear.py -k test_pattern_is_linear
	$(BIN)/python tests/fuzz_big.py --out benchmarks/HOSTILE-fuzz.md

# corpus scores (needs ../shared, which only developers have)
score: setup
	$(PY) ../shared/tools/score_corpus.py ../shared/corpus/sglang --diag $(BIN)/diag
	$(PY) ../shared/tools/score_corpus.py ../shared/corpus/smi --diag $(BIN)/diag
	for d in extra extra2 blind holdout fresh fresh3 fresh4 fresh5 fresh6 fresh7 fresh8 fresh9 fresh10 fresh11 fresh12 fresh13 fresh14 fresh16 fresh17 fresh18 fresh19 fresh20 fresh21 fresh22; do echo "== tests/data/$$d"; \
	  $(PY) ../shared/tools/score_corpus.py tests/data/$$d --diag $(BIN)/diag | tail -2; done

# the message catalog: re-merge the hand lists and reviews (no download); after editing a TOML file
catalog: setup
	$(BIN)/python scripts/build_catalog.py --hand-only

# the full rebuild from every SGLang release on PyPI (downloads into ~/.cache/diag-build, ~0.5 GB)
catalog-full: setup
	$(BIN)/python scripts/build_catalog.py --full

# mutation testing of the code that decides fix values and directions (mutmut; a full run is long:
# about 3,000 mutants over diag/findings.py, diag/memory/options.py, diag/explain/). Narrow it with
# MUTANTS, mutmut's name patterns: make mutate MUTANTS='diag.memory.options* diag.findings*'
# The survivors, grouped by file and function, those changing a fix's value or direction flagged:
# benchmarks/MUTANTS.md (docs/mutation.md says how to read it).
MUTANTS ?=
mutate: setup
	$(BIN)/pip install -q mutmut
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2 $(MUTANTS) || true
	$(BIN)/python scripts/mutants_report.py --markdown benchmarks/MUTANTS.md
