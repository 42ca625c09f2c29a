"""PolicyServer: an ExternalEnv whose application talks to it over gRPC (the serving bridge).

RLlib classic's PolicyServerInput, on the project's gRPC with its own .proto
(tfrl/serving/proto/policy_service.proto, compilable for any language): a trainer samples a
PolicyServer like any ExternalEnv (tfrl/env/external_env.py), and each call a remote
`PolicyClient` makes (start_episode, get_action, log_action, log_returns, end_episode, or a
batch of them from a local-inference client) becomes the same ExternalEnv call (the gRPC service
that turns them into these calls is policy_service.py). It also serves what a local-inference
client needs: the policy's class, spaces and config (`PolicyInfo`) and its current weights
(`GetWeights`).

Use it as the trainer's env, served by the trainer's own worker:

    trainer = PPOTrainer(env=lambda ctx: PolicyServer(obs_space, action_space, port=9900),
                         config={"num_workers": 0})

A remote client's actions come on one long-lived stream (`GetActionStream`; plain `GetAction`
calls are served too). Where the worker's policy has a numpy copy (`NumpyActor`: the default
fully connected policies) and no observation filter, the server answers each of them in the
calling thread with that copy, refreshed at the start of every `sample()`, and records the step
as a logged action whose likelihood and value the worker computes with the same copy (where the
policy has extra outputs of its own, with one TensorFlow call per block);
`inline_inference=False` or another policy: the worker's sampling loop answers, batched over the
episodes waiting. An episode's inline steps reach the worker in
blocks of up to INLINE_BLOCK_ROWS, as a local client's logged columns do: a block is queued when
it is full, before any other call of its episode, and whenever the worker finds nothing else
waiting for it. A local-inference client's steps come in columns
(`log_actions` in a `Report`), checked with one vectorised comparison each.

It listens on 127.0.0.1 unless given another host, can require a token (metadata key
`tfrl-policy-token`) and serve over TLS, decodes values with numpy only (nothing received is
unpickled), and answers a bad call with INVALID_ARGUMENT while it goes on serving the others.

`MultiAgentPolicyServer` is the same server for an ExternalMultiAgentEnv
(tfrl/env/external_multi_agent_env.py): its calls carry one value per agent (the proto's agent_*
fields, keyed by the agent id as a string) and its clients are `MultiAgentPolicyClient`s in
remote inference mode. With remote rollout workers, `PolicyServerPerWorker`
(worker_servers.py) starts one server per worker.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import hmac
import json
import logging
import math
import operator
import threading
from typing import Any, Dict, Hashable, Optional, Union

import grpc
import gymnasium.spaces as gym_spaces
import numpy as np

from tfrl import errors
from tfrl.checkpoint import storable
from tfrl.env.external_env import STEPS, ExternalEnv, _finite_reward
from tfrl.env.external_multi_agent_env import ExternalMultiAgentEnv
from tfrl.serving import values
from tfrl.policy.numpy_actor import NumpyActor
from tfrl.rollout.trajectory import LoggedSteps
from tfrl.serving.policy_service import (DEFAULT_MAX_MESSAGE_BYTES, TOKEN_METADATA_KEY,
                                         policy_service_handler)
from tfrl.serving.settings import ServingSettings
from tfrl.serving.proto import policy_service_pb2 as pb

logger = logging.getLogger(__name__)

# inline-answered steps of one episode queued for the worker together: one event and one batched
# policy call for their likelihoods instead of one event and one row of Python per step
INLINE_BLOCK_ROWS = 64
# up to this many dimensions an inline-answered observation's bounds are checked as Python floats
# (fewer calls than numpy's four); beyond it numpy's vectorised comparison is the faster
MAX_FLOAT_COMPARED_OBSERVATION = 64
# how long close() lets calls in flight finish before gRPC cancels them
SHUTDOWN_GRACE_SECONDS = 0.25


class PolicyServer(ExternalEnv):
    """An ExternalEnv served over gRPC; see the module docstring.

    Args:
      observation_space, action_space: the application's spaces.
      host: the interface to listen on; 127.0.0.1 unless you mean to serve other machines.
      port: the port; 0 picks a free one (read it from `port` or `address`).
      token: a shared secret every call must carry (`PolicyClient(token=...)`); None for none.
      tls_certificate, tls_private_key: PEM bytes (or str) to serve over TLS.
      max_concurrent: the most episodes running at once.
      max_workers: threads serving calls; each remote client's action stream holds one while it
        is open, each other call one while it runs.
      action_timeout_s: how long a `get_action` waits for the trainer to sample before the call
        ends with DEADLINE_EXCEEDED.
      max_message_bytes: the largest message accepted; larger ones end with RESOURCE_EXHAUSTED.
      inline_inference: answer remote `get_action` calls in the serving thread with the policy's
        numpy copy where it has one (see the module docstring); False: always through the
        worker's sampling loop.
      inline_max_backlog: the most steps waiting for the worker (queued or held back) before
        inline answers stop (the calls then wait for the sampling loop, so a trainer that does
        not sample holds clients back instead of queueing without bound).

    Raises:
      InvalidConfigError: only one of certificate and key.
      ExternalEnvError: the port cannot be bound.
    """

    multi_agent = False

    def __init__(self, observation_space, action_space, *, host: str = "127.0.0.1", port: int = 0,
                 token: Optional[str] = None, tls_certificate: Optional[Union[bytes, str]] = None,
                 tls_private_key: Optional[Union[bytes, str]] = None, max_concurrent: int = 100,
                 max_workers: int = 64, action_timeout_s: float = 60.0,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 inline_inference: bool = True, inline_max_backlog: int = 4096):
        super().__init__(action_space, observation_space, max_concurrent=max_concurrent,
                         action_timeout_s=action_timeout_s)
        if (tls_certificate is None) != (tls_private_key is None):
            raise errors.InvalidConfigError("TLS needs both a certificate and a private key")
        self.host = host
        self._token = token
        self._policy = None
        self._policy_config: dict = {}
        self._serving = ServingSettings.from_config({})
        self.inline_inference = bool(inline_inference)
        self.inline_max_backlog = int(inline_max_backlog)
        self._actor: Optional[NumpyActor] = None  # the inline copy of the policy, or None
        self._fast_inline: Optional[tuple] = None  # see _fast_inline_case
        self._held: Dict[str, LoggedSteps] = {}  # inline steps not queued yet, by episode
        self._held_steps = 0
        self._explore = True
        self._adapter = None
        # Discrete(n, start): (start, the serialized answer of each action)
        self._discrete_responses = None
        if type(action_space) is gym_spaces.Discrete and not self.multi_agent \
                and action_space.n <= 1024:
            start = int(action_space.start)
            self._discrete_responses = (start, [
                pb.GetActionResponse(action=values.encode_value(np.int64(start + i)))
                .SerializeToString() for i in range(int(action_space.n))])
        self._server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                  thread_name_prefix="policy-server"),
            options=[("grpc.max_receive_message_length", max_message_bytes),
                     ("grpc.max_send_message_length", max_message_bytes),
                     ("grpc.so_reuseport", 0)])
        self._server.add_generic_rpc_handlers((policy_service_handler(self),))
        address = f"{host}:{int(port)}"
        try:
            if tls_certificate is not None:
                credentials = grpc.ssl_server_credentials([(_as_bytes(tls_private_key),
                                                            _as_bytes(tls_certificate))])
                self.port = self._server.add_secure_port(address, credentials)
            else:
                self.port = self._server.add_insecure_port(address)
        except RuntimeError as exc:
            raise errors.ExternalEnvError(f"policy server cannot listen on {address}: {exc}") from exc
        if self.port == 0:
            raise errors.ExternalEnvError(
                f"policy server cannot listen on {address} (port in use?); with remote rollout "
                "workers make the env tfrl.serving.PolicyServerPerWorker (a port per worker)")
        self._server.start()
        self._closed_event = threading.Event()
        logger.info("policy server listening on %s", self.address)

    @property
    def address(self) -> str:
        return f"{'localhost' if self.host in ('127.0.0.1', 'localhost') else self.host}:{self.port}"

    def bind_policy(self, policy, config: dict, action_adapter=None) -> None:
        """Serves `policy` (the worker's acting copy) to local-inference clients; inline answers
        go through the worker's `action_adapter`."""
        self._policy = policy
        self._policy_config = config
        self._serving = ServingSettings.from_config(config)
        self._adapter = action_adapter
        self._actor = None  # made from this policy at the next refresh
        self._fast_inline = None

    def refresh_policy(self, explore: bool) -> None:
        """The worker starts a sample(): the inline copy takes the policy's current weights."""
        policy = self._policy
        if not self.inline_inference or self.multi_agent or policy is None \
                or self._adapter is None or self._serving.filtered():
            self._actor = self._fast_inline = None
            return
        self._explore = bool(explore)
        if self._actor is None:
            self._actor = NumpyActor.from_policy(policy)
            self._fast_inline = self._fast_inline_case()
        else:  # the bound policy's new weights
            self._actor.load_weights(policy)

    @property
    def inline_actor(self) -> Optional[NumpyActor]:
        return self._actor

    def _fast_inline_case(self) -> Optional[tuple]:
        """(dtype name, wire dtype, byte count, low, high) of the observations `inline_answer`
        takes (the bounds as lists of floats for a small space), or None when this server's
        spaces and policy are not its case."""
        space, actions, actor = self.observation_space, self.action_space, self._actor
        if actor is None or actor.distribution != "categorical" \
                or self._discrete_responses is None or int(actions.start) != 0 \
                or type(space) is not gym_spaces.Box or len(space.shape) != 1 \
                or space.dtype != np.float32 \
                or self._adapter is None or not self._adapter.is_discrete:
            return None
        wire = space.dtype.newbyteorder("<")
        low, high = space.low, space.high
        if space.shape[0] <= MAX_FLOAT_COMPARED_OBSERVATION:
            low, high = low.tolist(), high.tolist()
        return (space.dtype.name, wire, wire.itemsize * int(space.shape[0]), low, high)

    def get_action(self, episode_id: str, observation: Any, reward: float = 0.0) -> Any:
        """ExternalEnv.get_action, answered here by the inline copy of the policy when there is
        one (see the module docstring).

        Raises:
          As ExternalEnv.get_action.
        """
        actor = self._actor
        if actor is None or self.events.steps + self._held_steps >= self.inline_max_backlog:
            return super().get_action(episode_id, observation, reward)
        observation = self._checked(observation, self.observation_space, "observation",
                                    errors.InvalidObservationError)
        reward = _finite_reward(reward)
        actions = actor.act(observation, self._explore)
        self._hold(episode_id, observation, actions[0], reward)
        return self._adapter.env_action(self._adapter(actions), 0)

    def inline_answer(self, request) -> Optional[bytes]:
        """The serialized answer to a GetAction request, for the common case in one step: a
        rank-1 float32 Box observation sent as float32 and inside the space's bounds, a finite
        reward, a categorical policy over a Discrete(n) action space, and room in the backlog.
        None when the request is not that case (`get_action` then answers it, or says what is
        wrong with it).

        Raises:
          ExternalEnvError: an unknown or finished episode, or the env closed.
        """
        fast, actor = self._fast_inline, self._actor
        if fast is None or actor is None \
                or self.events.steps + self._held_steps >= self.inline_max_backlog:
            return None
        leaves = request.observation.leaves
        if len(leaves) != 1:
            return None
        leaf = leaves[0]
        dtype_name, dtype, byte_count, low, high = fast
        data = leaf.data
        if leaf.dtype != dtype_name or len(data) != byte_count or len(leaf.shape) != 1:
            return None
        observation = np.frombuffer(data, dtype)
        if type(low) is list:  # a few floats: compared as Python floats (NaN fails)
            floats = observation.tolist()
            inside = all(map(operator.le, low, floats)) and all(map(operator.le, floats, high))
        else:
            inside = ((observation >= low) & (observation <= high)).all()
        reward = request.reward
        if not inside or not math.isfinite(reward) or request.agent_rewards \
                or request.agent_observations:
            return None
        index = actor.categorical_index(observation, self._explore)
        self._hold(request.episode_id, observation, np.int64(index), reward)
        return self._discrete_responses[1][index]

    def _hold(self, episode_id: str, observation: Any, action: Any, reward: float) -> None:
        """Keeps an inline-answered step back to queue with its episode's next ones.

        Raises:
          ExternalEnvError: an unknown or finished episode, or the env closed.
        """
        with self._lock:
            self._check_running(episode_id)
            held = self._held.get(episode_id)
            if held is None:
                held = self._held[episode_id] = LoggedSteps(episode_id)
            held.add(observation, action, reward)
            self._held_steps += 1
            if len(held) >= INLINE_BLOCK_ROWS:
                self._queue_held(episode_id)

    def flush_buffered_steps(self) -> None:
        """Queues every episode's held inline steps (the worker found nothing else waiting)."""
        with self._lock:
            for episode_id in list(self._held):
                self._queue_held(episode_id)

    def _put_event(self, episode_id: str, event: tuple) -> None:
        if episode_id in self._held:  # the episode's earlier steps go first
            self._queue_held(episode_id)
        self.events.put(event)

    def _queue_held(self, episode_id: str) -> None:
        """Queues an episode's held steps as one event; called with the lock held."""
        held = self._held.pop(episode_id)
        self._held_steps -= len(held)
        observations, actions, rewards = held.columns()
        # the STEPS event a local client's logged columns become
        self.events.put((STEPS, episode_id, observations, actions, np.array(rewards, np.float64)))

    def run(self) -> None:
        self._closed_event.wait()

    def close(self) -> None:
        """Stops serving: calls in flight end with UNAVAILABLE, and the env closes."""
        super().close()  # wakes calls waiting for an action; they end with UNAVAILABLE
        self._closed_event.set()
        # A short grace lets the calls just woken end with UNAVAILABLE; gRPC cancels the rest
        # (open action streams among them), which a PolicyClient reports as UNAVAILABLE too.
        self._server.stop(grace=SHUTDOWN_GRACE_SECONDS).wait(SHUTDOWN_GRACE_SECONDS + 1.0)

    # --- what the servicer reads ------------------------------------------------------------
    def check_token(self, context) -> None:
        if self._token is None:
            return
        given = dict(context.invocation_metadata() or ()).get(TOKEN_METADATA_KEY, "")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self._token.encode()):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "missing or wrong token; pass the server's token to PolicyClient(token=...)")

    def policy_info(self) -> pb.PolicyInfoResponse:
        policy = self._require_policy()
        # the values this worker acts with, also where its config leaves them to the defaults
        config = storable(dict(self._policy_config, **dataclasses.asdict(self._serving)),
                          "config", [])
        cls = type(policy)
        return pb.PolicyInfoResponse(
            policy_class=f"{cls.__module__}:{cls.__qualname__}",
            observation_space_json=values.space_to_json(policy.observation_space),
            action_space_json=values.space_to_json(policy.action_space),
            config_json=json.dumps(config, default=_json_default),
            observation_filter=str(self._serving.observation_filter))

    def weights(self) -> pb.WeightsResponse:
        return values.weights_message(self._require_policy().get_weights())

    # --- how requests become ExternalEnv calls (MultiAgentPolicyServer overrides them) --------
    def decode_observation(self, request) -> Any:
        """The observation of a GetAction, LogAction or EndEpisode request.

        Raises:
          ExternalEnvError: a malformed value, or a multi-agent request.
        """
        if request.agent_observations:
            raise errors.ExternalEnvError(
                "this policy server is single-agent: send observation, not agent_observations "
                "(a multi-agent env is served by MultiAgentPolicyServer)")
        return values.decode_value(request.observation, self.observation_space, "observation")

    def decode_action(self, request) -> Any:
        return values.decode_value(request.action, self.action_space, "action")

    def decode_reward(self, request) -> Any:
        if request.agent_rewards:
            raise errors.ExternalEnvError(
                "this policy server is single-agent: send reward, not agent_rewards")
        return request.reward

    def action_response(self, action: Any) -> Union[pb.GetActionResponse, bytes]:
        """The GetAction answer for `action` (for a Discrete space, its serialized form, made
        once per action)."""
        cache = self._discrete_responses
        if cache is not None and type(action) is int and 0 <= action - cache[0] < len(cache[1]):
            return cache[1][action - cache[0]]
        return pb.GetActionResponse(action=values.encode_value(action))

    def _require_policy(self):
        if self._policy is None:
            raise errors.ExternalEnvError(
                "no policy is serving yet: the trainer's worker has not started this env")
        return self._policy


class MultiAgentPolicyServer(PolicyServer, ExternalMultiAgentEnv):
    """An ExternalMultiAgentEnv served over gRPC: each call carries one value per agent, keyed by
    the agent id as a string (`str(agent_id)`); see the module docstring.

    Args:
      observation_spaces, action_spaces: dicts agent id -> gymnasium space (the same agents).
      The keyword arguments are PolicyServer's.

    Raises:
      InvalidEnvError: the spaces are not two dicts over the same agents.
      InvalidConfigError: two agent ids with the same string (0 and "0"); a TLS half-pair.
      ExternalEnvError: the port cannot be bound.
    """

    multi_agent = True

    def __init__(self, observation_spaces: Dict[Hashable, Any], action_spaces: Dict[Hashable, Any],
                 **server_kwargs):
        agents = list(observation_spaces) if isinstance(observation_spaces, dict) else []
        self._agent_by_key = {str(agent): agent for agent in agents}
        if len(self._agent_by_key) != len(agents):
            raise errors.InvalidConfigError(
                f"agent ids {agents} collide as strings (the wire keys agents by str(agent_id)); "
                "give the agents distinct names")
        super().__init__(observation_spaces, action_spaces, **server_kwargs)

    def policy_info(self) -> pb.PolicyInfoResponse:
        return pb.PolicyInfoResponse(
            observation_filter=str(self._serving.observation_filter),
            agent_observation_spaces_json={str(a): values.space_to_json(s)
                                           for a, s in self.observation_spaces.items()},
            agent_action_spaces_json={str(a): values.space_to_json(s)
                                      for a, s in self.action_spaces.items()})

    def weights(self) -> pb.WeightsResponse:
        raise errors.NotSupportedError(
            "a multi-agent policy server serves no weights: local inference is single-agent "
            "only; use MultiAgentPolicyClient in remote inference mode")

    def agent_of_key(self, key: str) -> Hashable:
        """The env's agent id whose string is `key`.

        Raises:
          ExternalEnvError: no agent has that id.
        """
        try:
            return self._agent_by_key[key]
        except KeyError:
            raise errors.ExternalEnvError(
                f"unknown agent id {key!r}; this server's agents are "
                f"{sorted(self._agent_by_key)}") from None

    def decode_observation(self, request) -> Dict[Hashable, Any]:
        if request.HasField("observation"):
            raise errors.ExternalEnvError(
                "this policy server is multi-agent: send agent_observations (agent id -> "
                "observation), not observation")
        return self._decode_agents(request.agent_observations, self.observation_spaces,
                                   "observation")

    def decode_action(self, request) -> Dict[Hashable, Any]:
        if request.HasField("action"):
            raise errors.ExternalEnvError(
                "this policy server is multi-agent: send agent_actions, not action")
        return self._decode_agents(request.agent_actions, self.action_spaces, "action")

    def decode_reward(self, request) -> Dict[Hashable, float]:
        if request.reward:
            raise errors.ExternalEnvError(
                "this policy server is multi-agent: send agent_rewards, not reward")
        return {self.agent_of_key(key): reward for key, reward in request.agent_rewards.items()}

    def action_response(self, actions: Dict[Hashable, Any]) -> pb.GetActionResponse:
        return pb.GetActionResponse(agent_actions={str(agent): values.encode_value(action)
                                                   for agent, action in actions.items()})

    def _decode_agents(self, messages, spaces: dict, what: str) -> Dict[Hashable, Any]:
        decoded = {}
        for key, message in messages.items():
            agent = self.agent_of_key(key)
            decoded[agent] = values.decode_value(message, spaces[agent],
                                                 f"{what} of agent {key!r}")
        return decoded


def _as_bytes(value: Union[bytes, str]) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {value!r}")
