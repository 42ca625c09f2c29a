"""The serving bridge: an application that owns its environment trains and uses a tfrl policy.

`PolicyServer` (an ExternalEnv served over gRPC, policy_server.py; the gRPC service in front
of it is policy_service.py) runs inside the trainer; `PolicyClient` (policy_client.py) is the
application's side, asking for actions remotely (on one action stream, action_stream.py) or
acting with a local copy of the policy (in numpy where it can: tfrl/policy/numpy_actor.py).
`MultiAgentPolicyServer` / `MultiAgentPolicyClient` are the same for multi-agent envs, and
`PolicyServerPerWorker` (worker_servers.py) puts a server on every remote rollout worker. The wire
format is proto/policy_service.proto, its values plain arrays (values.py). Exported SavedModels
for serving systems are written by tfrl/serving_export.py.
"""
from tfrl.policy.numpy_actor import NumpyActor
from tfrl.serving.policy_client import MultiAgentPolicyClient, PolicyClient
from tfrl.serving.policy_server import MultiAgentPolicyServer, PolicyServer
from tfrl.serving.worker_servers import PolicyServerPerWorker, policy_server_addresses

__all__ = ["MultiAgentPolicyClient", "MultiAgentPolicyServer", "NumpyActor", "PolicyClient",
           "PolicyServer", "PolicyServerPerWorker", "policy_server_addresses"]
