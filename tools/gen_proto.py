"""Regenerates the protobuf and gRPC modules of the project's two services from their .proto files:
replay/proto/replay.proto (the replay service) and tfrl/serving/proto/policy_service.proto (the
policy service of the serving bridge).

Run from anywhere: `python tools/gen_proto.py` (needs grpcio-tools, the `dev` extra). Each
generated gRPC module imports its messages by package path (`replay.proto.replay_pb2`), so it works
from the installed package and not only from inside its folder.
"""
import argparse
import pathlib
import re
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTOS = [REPO_ROOT / "replay" / "proto" / "replay.proto",
          REPO_ROOT / "tfrl" / "serving" / "proto" / "policy_service.proto"]


def generate(proto: pathlib.Path) -> int:
    from grpc_tools import protoc  # the `dev` extra; `--help` and the tools list work without it

    folder = proto.parent
    result = protoc.main(["grpc_tools.protoc", f"--proto_path={folder}", f"--python_out={folder}",
                          f"--grpc_python_out={folder}", str(proto)])
    if result != 0:
        print(f"protoc failed on {proto} with exit code {result}", file=sys.stderr)
        return result
    stem = proto.stem
    package = ".".join(folder.relative_to(REPO_ROOT).parts)
    grpc_module = folder / f"{stem}_pb2_grpc.py"
    source = grpc_module.read_text()
    fixed, count = re.subn(rf"^import {stem}_pb2 as (\w+)$", rf"from {package} import {stem}_pb2 as \1",
                           source, flags=re.M)
    if count != 1:
        print(f"could not find the generated 'import {stem}_pb2' line to fix", file=sys.stderr)
        return 1
    grpc_module.write_text(fixed)
    print(f"generated {folder / f'{stem}_pb2.py'} and {grpc_module}")
    return 0


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    for proto in PROTOS:
        result = generate(proto)
        if result:
            return result
    return 0


if __name__ == "__main__":
    sys.exit(main())
