"""The build hook: generates the protobuf types from proto/ (generate_types.py) before setuptools packs them.

It also pins the protobuf runtime to the generated code: code made by one grpcio-tools release refuses to load on
an older protobuf runtime, or on another major version, so the requirement is taken from the code itself.
"""

import sys
from pathlib import Path

from setuptools import find_packages, setup

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_types

generate_types.generate()
major, minor, patch = generate_types.gencode_version()

setup(
    packages=sorted({*find_packages("src"), *generate_types.gen_packages()}),
    package_dir={"": "src"},
    package_data={"matchmaker_client": ["py.typed"], "": ["*.pyi"]},
    install_requires=[
        f"protobuf>={major}.{minor}.{patch},<{major + 1}",
        "grpcio>=1.66",
        "websockets>=14.0",
    ],
)
