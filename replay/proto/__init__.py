"""The replay service's gRPC definition (replay.proto) and its generated code.

Regenerate the generated modules with `python tools/gen_proto.py` after editing the proto.
"""
