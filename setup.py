"""Installs tfrl: the `replay` experience service and the `tfrl` agent toolkit."""
from setuptools import find_packages, setup

setup(
    name="tfrl",
    version="0.1.0",
    description="A tf.data-centric reinforcement-learning toolkit: RLlib-style components "
    "fed by a Reverb-style replay service.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["replay", "replay.*", "tfrl", "tfrl.*"]),
    include_package_data=True,
    package_data={"replay": ["proto/*.proto"], "tfrl": ["tuned_examples/*.yaml", "serving/proto/*.proto"]},
    install_requires=[
        "tensorflow>=2.16,<2.22",
        "tensorflow-probability>=0.24,<0.26",
        "tf-keras>=2.16,<2.22",
        "dm-tree>=0.1.8",
        "ray[tune]>=2.40,<3",
        "gymnasium>=1.0,<2",
        "numpy>=1.26",
        "lz4>=4.3",
        # the chunk checksum: the standard CRC-32, 10-20x faster than zlib's (replay/checksum.py)
        "zlib-ng>=0.5",
        "grpcio>=1.85.1",
        "protobuf>=7.35.1,<8",
        "PyYAML>=6",
        "rich>=13",
        "tensorboard>=2.20",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.2",
            # the test command runs the suite in two processes (-n 2)
            "pytest-xdist>=3.5",
            # the lint step of the test command (rules in ruff.toml)
            "ruff>=0.6",
            # the layer contract of the test command (.importlinter)
            "import-linter>=2.1",
            "hypothesis>=6.100",
            # the chi-square test of sampling distributions in tools/reverb_diff (run by the suite)
            "scipy>=1.11",
            "pettingzoo>=1.24",
            # self-signed certificates for the TLS server tests
            "cryptography>=42",
            # the Atari env tests (tests/tfrl/env/test_atari.py); ale-py ships the ROMs
            "ale-py>=0.9",
            "opencv-python-headless>=4.8",
        ],
        # multi-agent envs through tfrl.env.ParallelPettingZooEnv (the base package is light:
        # numpy, gymnasium; its env families have their own pettingzoo extras)
        "pettingzoo": ["pettingzoo>=1.24"],
        # gymnasium's MuJoCo envs (HalfCheetah-v5, ...; tuned example halfcheetah-sac)
        "mujoco": ["gymnasium[mujoco]>=1.0"],
        # Atari games through tfrl.env.atari (ale-py ships the ROMs; gymnasium's
        # AtariPreprocessing resizes frames with opencv); tuned example pong-impala
        "atari": ["ale-py>=0.9", "opencv-python-headless>=4.8"],
        "dev": ["grpcio-tools>=1.85.1"],
    },
    entry_points={
        "console_scripts": [
            "replay-server=replay.server_main:main",
            "tfrl=tfrl.cli:run",
        ],
    },
)
