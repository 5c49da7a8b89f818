# `make lab` opens the course; `make test` runs every test (unit, property, slow, nbval over every
# notebook); `make lint` runs ruff. Each sets up .venv. The learner's and instructor's targets (lab,
# progress, doctor, student, grade) only call the package's command, `lmcore-course` (any OS, no
# make). (`pytest tests/` alone: the fast unit suite.)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab progress doctor test-wheel lint actionlint test test-portable test-browser student notebooks figures benchmarks clean grade test-teach

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

# make lab: the learner's workspace/ (git-ignored; built on the first run from the learner edition,
# refreshed later without replacing a notebook you changed), opened in JupyterLab.
# make lab EDITION=instructor: notebooks/ with the solutions (autosave off). DRY_RUN=1: build or
# refresh the workspace (and the venv, on a fresh clone), then print JupyterLab's command, not start it.
# make lab LANG=zh: the Chinese edition (zh/notebooks/) in workspace-zh/. Only a LANG given on the
# command line counts: the environment's LANG (a locale such as en_US.UTF-8) is not a course language.
EDITION ?= learner
lab: $(STAMP)
	$(BIN)/lmcore-course lab --edition $(EDITION) $(if $(filter command line,$(origin LANG)),--lang $(LANG)) $(if $(DRY_RUN),--dry-run)

# Is this machine ready for the course? One line per item (Python, torch, the device against the
# CPU, the notebook stack, the widgets' extension, the workspace, disk), each with its fix.
doctor: $(STAMP)
	$(BIN)/lmcore-course doctor

# Every check of workspace/ run headlessly (nothing in it changes): a notebook x exercise table.
# make progress LANG=zh: of workspace-zh/, against the Chinese edition.
progress: $(STAMP)
	$(BIN)/lmcore-course progress $(if $(filter command line,$(origin LANG)),workspace-$(LANG) --instructor $(LANG)/notebooks,workspace)

# nbval against the committed outputs; its options (current env, notebooks/sanitize.cfg, the cell
# timeout) are the root conftest.py's, applied whenever nbval runs (also `pytest notebooks/03_*.ipynb`).
# pyproject's addopts deselect slow tests; make test runs all.
# JOBS: pytest-xdist workers (auto: one per CPU core); --dist loadfile keeps a notebook's cells,
# and a test file's tests, on one worker, in order. JOBS=0 runs in one process.
NBVAL := --nbval
ALL_TESTS := -m "slow or not slow"
JOBS ?= auto
XDIST := -n $(JOBS) --dist loadfile

test: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) $(ALL_TESTS) $(NBVAL) --ignore=tests/teach tests notebooks

# nbval over every notebook under other CPU code paths, against the committed outputs: PyTorch's
# non-vectorised kernels with MKL's compatible path, and PyTorch's AVX2 kernels, both at once
# (lmcore.course.build.portable). One notebook: make test-portable NB="03_*"
test-portable: $(STAMP)
	$(BIN)/python -m lmcore.course.build.portable "$(NB)"

# Another torch than requirements.txt's, in its own git-ignored venv (.venv-torch-X.Y.Z): the
# fast suite (pytest tests/) and nbval over TORCH_NB, the notebooks measured to hold on 2.11.0
# and 2.14.1 (widen it after re-executing the notebooks: TORCH_NB="*"), in one parallel run.
# make test-torch TORCH=2.11.0 (the floor pyproject declares). PyPI's Linux wheel is a CUDA
# build: its nvidia-* libraries come along (`import torch` needs them, even on the CPU), about
# 4.6 GB; --no-cache-dir keeps them out of pip's cache. TORCH_CLEAN=1 removes the venv after.
# make torch-venv TORCH=X.Y.Z only installs it (.ci/run installs both in the background). Its
# matplotlib keeps its font cache in the venv, not in ~/.cache beside every other venv's: a cache
# there may name fonts of a venv that TORCH_CLEAN removed (one found here held none of
# matplotlib's own fonts: every later plot printed findfont warnings to stderr, which nbval
# counts as a changed output).
TORCH       ?= 2.11.0
TORCH_VENV  := .venv-torch-$(TORCH)
TORCH_NB    ?= 03_* 05_* 07_*
.PHONY: test-torch torch-venv
torch-venv:
	test -f $(TORCH_VENV)/.installed || { $(PYTHON) -m venv $(TORCH_VENV) && \
	  grep -v '^torch==' requirements.txt > $(TORCH_VENV)/requirements.txt && \
	  $(TORCH_VENV)/bin/python -m pip install -q --no-cache-dir --no-compile \
	    torch==$(TORCH) -r $(TORCH_VENV)/requirements.txt && touch $(TORCH_VENV)/.installed; }

test-torch: torch-venv
	MPLCONFIGDIR=$(CURDIR)/$(TORCH_VENV)/matplotlib PYTHONPATH=$(CURDIR) $(TORCH_VENV)/bin/python -m pytest -q $(XDIST) $(NBVAL) tests \
	  $(addprefix notebooks/,$(addsuffix .ipynb,$(TORCH_NB)))
	$(if $(TORCH_CLEAN),rm -rf $(TORCH_VENV))

# ruff (lint + format check, configured in pyproject.toml) over the code, the tests and the
# notebooks. Needs only ruff (requirements-dev.txt), not the course stack: cheap, so CI runs it first.
LINT_STAMP := $(VENV)/.lint-installed
LINT_PATHS := lmcore tests benchmarks browser notebooks site conftest.py

$(LINT_STAMP): requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	touch $(LINT_STAMP)

lint: $(LINT_STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(MAKE) --no-print-directory actionlint

# The GitHub Actions workflows, checked with actionlint (requirements-dev.txt installs it where it has
# a wheel: Linux and Windows). Missing anywhere else than macOS, it fails: a lint that did not run
# must not read as one that passed.
WORKFLOWS := .github/workflows/ci.yml .github/workflows/pages.yml
actionlint: $(LINT_STAMP)
	@if [ -x $(BIN)/actionlint ]; then $(BIN)/actionlint $(WORKFLOWS) && echo "actionlint: the workflows pass"; \
	elif [ "$$(uname -s)" = Darwin ]; then echo "actionlint: no macOS wheel; skipped (brew install actionlint)"; \
	else echo "actionlint: not installed in $(VENV) (pip install -r requirements-dev.txt)"; exit 1; fi

BROWSER_STAMP := $(VENV)/.browser-installed

$(BROWSER_STAMP): $(STAMP) requirements-browser.txt
	$(BIN)/python -m pip install -q -r requirements-browser.txt
	touch $(BROWSER_STAMP)

# The course without a clone: build the wheel, install it with the course extra into a fresh venv
# outside the repository, then doctor, lab --dry-run and notebook 00 of the new workspace there
# (lmcore.course.build.wheel_check; about 70 s, most of it pip installing torch).
test-wheel: $(STAMP)
	$(BIN)/python -m lmcore.course.build.wheel_check

# Real-browser test of the widgets (headless Debian chromium + playwright); skips without
# chromium. One notebook: make test-browser NB="03_*"; the Chinese edition's learner workspace
# too: make test-browser BROWSER_TEST_ZH="01_*"
test-browser: $(BROWSER_STAMP)
	$(BIN)/python browser/run_browser_test.py "$(NB)"

# The course website: a static HTML site of the committed, executed notebooks (never re-executed),
# built offline by Sphinx + myst-nb + sphinx-book-theme in its own venv into build/site/html, the
# Chinese edition (zh/notebooks) into build/site/html/zh.
# SITE_REPO=owner/repo sets the GitHub repository its Colab links open (default: the origin remote).
# SOLUTIONS=0: no solution toggles, no Colab or GitHub buttons, the graded edition as the download.
.PHONY: site test-site
SITE_VENV  := .venv-site
SITE_STAMP := $(SITE_VENV)/.installed

$(SITE_STAMP): requirements-site.txt
	$(PYTHON) -m venv $(SITE_VENV)
	$(SITE_VENV)/bin/python -m pip install -q -r requirements-site.txt
	touch $(SITE_STAMP)

site: $(SITE_STAMP)
	$(SITE_VENV)/bin/python site/build.py $(if $(SITE_REPO),--repo $(SITE_REPO)) $(NO_SOLUTIONS)

# Real-browser test of the built site (headless Debian chromium + playwright, as test-browser),
# then of the graded-class site (SOLUTIONS=0, built into build/site-graded): no toggle, no Colab
# or GitHub link, the student edition as download. Screenshots in .browser-test/site*/. Skips
# without chromium.
test-site: site $(BROWSER_STAMP)
	$(BIN)/python browser/site_test.py build/site/html
	$(SITE_VENV)/bin/python site/build.py --no-solutions --out build/site-graded $(if $(SITE_REPO),--repo $(SITE_REPO))
	$(BIN)/python browser/site_test.py build/site-graded/html --no-solutions --out .browser-test/site-graded

# make student SOLUTIONS=0: the graded-class edition (stubs offer hints only; student/.lmcore/edition.json
# turns show_solution's reference solution off in it). make site SOLUTIONS=0: the site without them.
SOLUTIONS ?= 1
NO_SOLUTIONS := $(if $(filter 0,$(SOLUTIONS)),--no-solutions)
student: $(STAMP)
	$(BIN)/lmcore-course student student $(NO_SOLUTIONS)

# Re-execute notebooks in place (top to bottom, widget state stripped): make notebooks NB="01_*";
# then regenerate their Chinese edition (zh/notebooks/: the same code and outputs), which fails,
# naming the cell, where an English text changed since it was translated.
NB ?= *
notebooks: $(STAMP)
	$(BIN)/python -m lmcore.course.build.nbtools notebooks/$(NB).ipynb
	$(BIN)/lmcore-course translate --lang zh "$(NB)"

# Regenerate every PNG in figures/ from the notebooks' own plotting functions (~1-2 min on 2 cores).
figures: $(STAMP)
	$(BIN)/python -m lmcore.course.build.figures figures

# Performance comparisons, run by hand; results are recorded in the README.
benchmarks: $(STAMP)
	$(BIN)/python benchmarks/loss_memory.py
	$(BIN)/python benchmarks/train_throughput.py

clean:
	rm -rf $(VENV) .venv-site .venv-torch-* .lab build/site .pytest_cache .ruff_cache  # never workspace/ or student/: learners' work

# Instructors (needs nbgrader: the `teach` extra, installed here from requirements-teach.txt).
# Grade SUBMISSIONS/<student>/<notebook>.ipynb with nbgrader's autograder into
# $(GRADES)/grades.csv and $(GRADES)/feedback/: make grade SUBMISSIONS=dir
TEACH_STAMP  := $(VENV)/.teach-installed
GRADES       ?= grades
CELL_TIMEOUT ?= 300

$(TEACH_STAMP): $(STAMP) requirements-teach.txt
	$(BIN)/python -m pip install -q -r requirements-teach.txt
	touch $(TEACH_STAMP)

grade: $(TEACH_STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=dir [GRADES=grades] [CELL_TIMEOUT=300]"; exit 2; }
	$(BIN)/lmcore-course grade "$(SUBMISSIONS)" --out "$(GRADES)" --timeout $(CELL_TIMEOUT)

# The instructor tools: nbgrader metadata, nbgrader's release = make student, grading end to end,
# and Run All of every student notebook. TEACH_ARGS: more pytest arguments (CI leaves out the
# student edition's Run All when the browser test, which checks the same in Lab, will run).
TEACH_ARGS ?=
test-teach: $(TEACH_STAMP)
	$(BIN)/python -m pytest -q $(XDIST) $(ALL_TESTS) tests/teach $(TEACH_ARGS)
