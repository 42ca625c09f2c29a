"""A policy server on every rollout worker: the serving bridge with remote (Ray) workers.

RLlib classic's PolicyServerInput with `num_workers > 0`. Make the trainer's env a
`PolicyServerPerWorker` and each remote rollout worker hosts its own PolicyServer (or
MultiAgentPolicyServer) on its own port; the trainer samples every remote worker, so it trains
from the calls of all the servers' clients:

    trainer = PPOTrainer(env=PolicyServerPerWorker(obs_space, action_space, port=9900),
                         config={"num_workers": 2})
    # worker 1 listens on localhost:9901, worker 2 on localhost:9902
    addresses = policy_server_addresses(trainer)

Ports: worker i listens on `port + i`; port 0 gives every worker a free port of its own, which
`policy_server_addresses` reports. With `num_workers: 0` the trainer's own worker serves on
`port` (as a plain PolicyServer would); with remote workers the driver's worker, which does not
sample, hosts no server. Servers listen on 127.0.0.1 unless given `host`; a server given a
wildcard host ("0.0.0.0", "::") is reported at its node's IP address.
"""
from __future__ import annotations

from typing import Any, List

from tfrl import errors
from tfrl.env.external_env import ExternalEnv
from tfrl.env.external_multi_agent_env import ExternalMultiAgentEnv
from tfrl.serving.policy_server import MultiAgentPolicyServer, PolicyServer

WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


class PolicyServerPerWorker:
    """An env creator (`env=` of a trainer) that starts one policy server per rollout worker;
    see the module docstring.

    Args:
      observation_space, action_space: the application's spaces; dicts agent id -> space make
        every server a MultiAgentPolicyServer.
      port: the base port (worker i listens on port + i); 0 picks a free port per worker.
      server_kwargs: PolicyServer's other keyword arguments (host, token, TLS, timeouts...).

    Raises:
      InvalidConfigError: a port outside 0..65535, or one space a dict and the other not.
    """

    def __init__(self, observation_space: Any, action_space: Any, *, port: int = 0,
                 **server_kwargs):
        port = int(port)
        if not 0 <= port <= 65535:
            raise errors.InvalidConfigError(f"port must be in 0..65535 (0: free ports), got {port}")
        if isinstance(observation_space, dict) != isinstance(action_space, dict):
            raise errors.InvalidConfigError(
                "give both spaces as gymnasium spaces (single-agent) or both as dicts agent id -> "
                "space (multi-agent)")
        self.observation_space = observation_space
        self.action_space = action_space
        self.port = port
        self.server_kwargs = dict(server_kwargs)
        self.multi_agent = isinstance(observation_space, dict)

    def __call__(self, context: Any) -> ExternalEnv:
        """The env of the worker `context` (an EnvContext) is for.

        Raises:
          ExternalEnvError: the worker's port cannot be bound.
        """
        worker_index = int(getattr(context, "worker_index", 0))
        if worker_index == 0 and int(getattr(context, "num_workers", 0)) > 0:
            cls = _DriverMultiAgentEnv if self.multi_agent else _DriverEnv
            return cls(self.action_space, self.observation_space)
        port = self.port + worker_index if self.port else 0
        cls = MultiAgentPolicyServer if self.multi_agent else PolicyServer
        return cls(self.observation_space, self.action_space, port=port, **self.server_kwargs)


def policy_server_addresses(trainer: Any) -> List[str]:
    """The "host:port" of every policy server a trainer's rollout workers host, in worker order
    (the driver's worker first when it serves, i.e. with no remote workers).

    Args:
      trainer: a trainer, or its WorkerSet.

    Raises:
      InvalidConfigError: no worker hosts a policy server.
    """
    workers = getattr(trainer, "workers", trainer)
    addresses = [a for a in workers.foreach_worker(_server_address) if a is not None]
    if not addresses:
        raise errors.InvalidConfigError(
            "no rollout worker of this trainer hosts a policy server; make its env a "
            "PolicyServer (num_workers: 0) or a PolicyServerPerWorker")
    return addresses


def _server_address(worker) -> Any:
    env = getattr(worker, "env", None)
    if not isinstance(env, PolicyServer):
        return None
    if env.host not in WILDCARD_HOSTS:
        return env.address
    try:
        import ray

        host = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - outside Ray the machine's name is the best we have
        import socket

        host = socket.gethostname()
    return f"{host}:{env.port}"


class _NoServerOnDriver:
    """The env of the driver's worker when remote workers serve: the spaces, and no server."""

    def run(self) -> None:
        raise errors.ExternalEnvError(
            "the driver's rollout worker hosts no policy server when the trainer has remote "
            "workers (they serve, on their own ports: see policy_server_addresses); sample the "
            "remote workers")


class _DriverEnv(_NoServerOnDriver, ExternalEnv):
    pass


class _DriverMultiAgentEnv(_NoServerOnDriver, ExternalMultiAgentEnv):
    pass
