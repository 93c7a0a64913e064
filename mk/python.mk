# The heapkit Python package (python/, pyproject.toml) in a virtual environment, .venv/.
# `make python` creates it and (re)installs the package when its sources change;
# `make test` and `make demo` depend on it.
PYTHON ?= python3
VENV   ?= .venv
PY_STAMP   := $(VENV)/.heapkit-installed
PY_SOURCES := pyproject.toml $(shell find python src/trace src/sim src/record src/replay src/wrapper src/preload \
                include cmake -type f -not -path '*/__pycache__/*' 2>/dev/null)

.PHONY: python
python: deps $(PY_STAMP)

# The build tools are installed in the venv and the build runs without isolation, so that
# reinstalls reuse build-python/ and take seconds.
$(PY_STAMP): $(PY_SOURCES)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" "pytest>=7" "jsonschema>=4" \
	    "playwright>=1.40" "ray>=2.9"
	$(VENV)/bin/python -m pip install -q --no-build-isolation .
	touch $@
