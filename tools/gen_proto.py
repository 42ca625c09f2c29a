"""Regenerates replay/proto/replay_pb2.py and replay_pb2_grpc.py from replay/proto/replay.proto.

Run from anywhere: `python tools/gen_proto.py` (needs grpcio-tools, the `dev` extra). The
generated gRPC module imports the messages as `replay.proto.replay_pb2`, so it works from the
installed package and not only from inside its folder.
"""
import pathlib
import re
import sys

from grpc_tools import protoc

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "replay" / "proto"


def main() -> int:
    result = protoc.main([
        "grpc_tools.protoc",
        f"--proto_path={PROTO_DIR}",
        f"--python_out={PROTO_DIR}",
        f"--grpc_python_out={PROTO_DIR}",
        str(PROTO_DIR / "replay.proto"),
    ])
    if result != 0:
        print(f"protoc failed with exit code {result}", file=sys.stderr)
        return result
    grpc_module = PROTO_DIR / "replay_pb2_grpc.py"
    source = grpc_module.read_text()
    fixed, count = re.subn(r"^import replay_pb2 as replay__pb2$",
                           "from replay.proto import replay_pb2 as replay__pb2", source, flags=re.M)
    if count != 1:
        print("could not find the generated 'import replay_pb2' line to fix", file=sys.stderr)
        return 1
    grpc_module.write_text(fixed)
    print(f"generated {PROTO_DIR / 'replay_pb2.py'} and {grpc_module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
