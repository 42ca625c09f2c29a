"""The policy service's gRPC definition (policy_service.proto) and its generated code.

Regenerate the generated modules with `python tools/gen_proto.py` after editing the proto.
"""
