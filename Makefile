# `make lab` opens the course; `make test` runs every test (unit, property, nbval). Both set up .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test student notebooks figures benchmarks clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

test: $(STAMP)
	$(BIN)/python -m pytest

student: $(STAMP)
	$(BIN)/python -m lmcore.course.student notebooks student

# Re-execute notebooks in place (top to bottom, widget state stripped): make notebooks NB="01_*"
NB ?= *
notebooks: $(STAMP)
	$(BIN)/python -m lmcore.course.nbtools notebooks/$(NB).ipynb

# Regenerate every PNG in figures/ from the notebooks' own plotting functions (~1-2 min on 2 cores).
figures: $(STAMP)
	$(BIN)/python -m lmcore.course.figures figures

# Performance comparisons, run by hand; results are recorded in the README.
benchmarks: $(STAMP)
	$(BIN)/python benchmarks/loss_memory.py
	$(BIN)/python benchmarks/train_throughput.py

clean:
	rm -rf $(VENV) student .pytest_cache
