"""Generates the client's protobuf types from the repository's proto/ with grpcio-tools.

Run by setup.py on every build (pip install, pip wheel, an editable install), and by hand after editing a
.proto file: ``python generate_types.py``. The output, src/matchmaker_client/gen/, is not committed.

protoc names Python modules after the .proto paths (``matchmaker.core.v1.resources_pb2``), which would claim
the top-level name ``matchmaker`` in a game backend's environment; the imports are rewritten to live under
``matchmaker_client.gen`` instead (``matchmaker_client.gen.core.v1.resources_pb2``). The descriptors keep their
file names, so the messages are the contract's, byte for byte.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "src" / "matchmaker_client" / "gen"
# The contract's public packages, as the TypeScript client generates them (packages/client/buf.gen.yaml):
# not the service's replication records.
PACKAGES = ("core/v1", "outcomes/v1", "engines/standard/v1", "admin/v1")
_VERSION = re.compile(r"^# Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", re.MULTILINE)


def proto_root() -> Path | None:
    """The proto/ directory: the repository's, or a copy beside this file (an unpacked source archive)."""
    for candidate in (HERE / "proto", HERE.parent.parent / "proto"):
        if (candidate / "matchmaker" / "core" / "v1" / "service.proto").is_file():
            return candidate
    return None


def gen_packages() -> list[str]:
    """The Python packages the generated code lives in (for setup.py's package list)."""
    names = ["matchmaker_client.gen"]
    for package in PACKAGES:
        parts = package.split("/")
        for i in range(1, len(parts) + 1):
            name = "matchmaker_client.gen." + ".".join(parts[:i])
            if name not in names:
                names.append(name)
    return names


def _rewrite(text: str) -> str:
    text = re.sub(r"^from matchmaker\.", "from matchmaker_client.gen.", text, flags=re.MULTILINE)
    # The module name the builder gives the classes (their __module__), so they pickle under the real path.
    return re.sub(r"'matchmaker\.([\w.]+_pb2)'", r"'matchmaker_client.gen.\1'", text)


def generate() -> Path:
    """Writes src/matchmaker_client/gen/ from proto/; without proto/ (a built sdist) keeps what is there."""
    root = proto_root()
    if root is None:
        if (OUT / "core" / "v1" / "service_pb2.py").is_file():
            return OUT
        sys.exit("generate_types.py: proto/ not found (looked in ../../proto and ./proto); build from the repository")
    from grpc_tools import protoc  # a build requirement, imported only when generating

    includes = Path(protoc.__file__).resolve().parent / "_proto"  # google/protobuf/timestamp.proto
    files = sorted(
        str(p.relative_to(root)) for package in PACKAGES for p in (root / "matchmaker" / package).glob("*.proto")
    )
    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{root}", f"-I{includes}", f"--python_out={tmp}", f"--pyi_out={tmp}", *files]
        if protoc.main(args) != 0:
            sys.exit(f"generate_types.py: protoc failed on {files}")
        if OUT.exists():
            shutil.rmtree(OUT)
        shutil.copytree(Path(tmp) / "matchmaker", OUT)
    for name in gen_packages():
        init = OUT.joinpath(*name.split(".")[2:], "__init__.py")
        init.write_text('"""Generated from proto/ by generate_types.py; not committed."""\n')
    for path in [*OUT.rglob("*_pb2.py"), *OUT.rglob("*_pb2.pyi")]:
        path.write_text(_rewrite(path.read_text()))
    return OUT


def gencode_version() -> tuple[int, int, int]:
    """The protobuf version the generated code was made for: the runtime must be at least this, same major."""
    match = _VERSION.search((OUT / "core" / "v1" / "service_pb2.py").read_text())
    if match is None:
        sys.exit("generate_types.py: no 'Protobuf Python Version' in the generated code")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


if __name__ == "__main__":
    print(generate())
