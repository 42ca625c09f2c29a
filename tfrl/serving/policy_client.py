"""PolicyClient: the application's side of the serving bridge (RLlib classic's PolicyClient).

An application that owns its environment (a game server, a simulator, a production system)
makes the ExternalEnv calls against a remote `PolicyServer` (policy_server.py):

    client = PolicyClient("localhost:9900")
    episode_id = client.start_episode()
    action = client.get_action(episode_id, observation)
    client.log_returns(episode_id, reward)
    client.end_episode(episode_id, observation)

inference_mode "remote" (the default) asks the server for every action, on one long-lived
stream (`GetActionStream`, action_stream.py; a client used from several threads at once sends the
calls that find the stream busy as plain `GetAction` calls): one round trip each, and the
trainer's current policy answers. "local" builds a copy of the server's policy in this
process (its class, spaces and config from the server's `PolicyInfo`; the class must come from
the tfrl package unless `policy_class` is given), acts with it (through its numpy copy,
`NumpyActor`, where the policy has one), pulls fresh weights every
`update_interval` seconds, and sends the episode's calls in batches (`Report`): at each episode
end and every `report_every` steps, an episode's consecutive steps as columns (one
`log_actions` call of stacked observations, actions and rewards). Local inference needs the
server's `observation_filter` to be NoFilter (a filter's statistics live in the trainer).

`MultiAgentPolicyClient` makes the same calls against a `MultiAgentPolicyServer` with dicts
keyed by agent id (RLlib classic's multi-agent PolicyClient calls); it infers remotely only.

Errors: every call the server refuses raises `PolicyServerError` with the gRPC status code's
name in `code` and the server's message; in local mode a refused batched call surfaces at the
next flush.
"""
from __future__ import annotations

import importlib
import json
import threading
import time
import uuid
from typing import Any, Callable, Dict, Hashable, List, Optional, Union

import grpc
import numpy as np

from tfrl import errors
from tfrl.serving import values
from tfrl.policy.numpy_actor import NumpyActor
from tfrl.rollout.action_adapter import ActionAdapter
from tfrl.rollout.trajectory import LoggedSteps
from tfrl.serving.action_stream import ActionStream
from tfrl.serving.policy_service import DEFAULT_MAX_MESSAGE_BYTES, SERVICE_NAME, TOKEN_METADATA_KEY
from tfrl.serving.settings import ServingSettings
from tfrl.serving.proto import policy_service_pb2 as pb
from tfrl.serving.proto import policy_service_pb2_grpc as pb_grpc

INFERENCE_MODES = ("remote", "local")
# the most distinct scalar answers a client keeps parsed (a Discrete(n) action has n)
MAX_CACHED_ACTIONS = 1024


class PolicyClient:
    """Calls a PolicyServer; see the module docstring.

    Args:
      address: "host:port" of the server.
      inference_mode: "remote" or "local".
      token: the server's token, if it has one.
      root_certificates: PEM of the CA (or self-signed certificate) to trust; given, the channel
        uses TLS.
      update_interval: local mode: seconds between weight pulls.
      report_every: local mode: send the buffered calls once this many are waiting.
      policy_class: local mode: the policy class to build instead of the server's.
      timeout: seconds a call may take (a remote `get_action` waits for the trainer to sample).
      numpy_inference: local mode: act with a numpy copy of the policy where it has one
        (`NumpyActor`: fully connected, categorical or Gaussian; tens of microseconds an action)
        rather than a TensorFlow call; False always uses TensorFlow.

    Raises:
      InvalidConfigError: an unknown inference mode; local mode with an observation filter.
      PolicyServerError: local mode could not read the server's policy.
      NotSupportedError: local mode with a policy class outside the tfrl package.
    """

    def __init__(self, address: str, inference_mode: str = "remote", *, token: Optional[str] = None,
                 root_certificates: Optional[Union[bytes, str]] = None, update_interval: float = 10.0,
                 report_every: int = 512, policy_class: Any = None, timeout: float = 120.0,
                 numpy_inference: bool = True):
        if inference_mode not in INFERENCE_MODES:
            raise errors.InvalidConfigError(
                f"inference_mode must be one of {INFERENCE_MODES}, got {inference_mode!r}")
        self.address = address
        self.inference_mode = inference_mode
        self.timeout = timeout
        options = [("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES)]
        if root_certificates is not None:
            pem = root_certificates.encode() if isinstance(root_certificates, str) else root_certificates
            credentials = grpc.ssl_channel_credentials(pem)
            self._channel = grpc.secure_channel(address, credentials, options)
            self._open_stream_channel = lambda: grpc.aio.secure_channel(address, credentials, options)
        else:
            self._channel = grpc.insecure_channel(address, options)
            self._open_stream_channel = lambda: grpc.aio.insecure_channel(address, options)
        self._stub = pb_grpc.PolicyServiceStub(self._channel)
        # GetAction with its answer left as bytes, as the action stream gives them
        self._get_action_bytes = self._channel.unary_unary(
            f"/{SERVICE_NAME}/GetAction", request_serializer=pb.GetActionRequest.SerializeToString,
            response_deserializer=None)
        self._metadata = ((TOKEN_METADATA_KEY, token),) if token is not None else ()
        self._lock = threading.Lock()
        # local mode: the calls to report, in order; an episode's consecutive steps are one
        # LoggedSteps entry (open in `_open_steps` until a call of the episode or a flush closes it)
        self._calls: List[Union[pb.Call, LoggedSteps]] = []
        self._open_steps: Dict[str, LoggedSteps] = {}
        self._buffered_steps = 0
        self._stream: Optional[ActionStream] = None
        self._stream_lock = threading.Lock()
        self._stream_supported = True
        self._report_in_flight = None  # a Report sent without waiting (local mode)
        self._flush_lock = threading.Lock()
        self.report_every = int(report_every)
        self.update_interval = float(update_interval)
        self.policy = None
        self._numpy_inference = bool(numpy_inference)
        self.numpy_actor: Optional[NumpyActor] = None
        self._action_space = None
        self._rewards: dict = {}  # rewards not sent yet, by episode
        # a stream answer's bytes -> its scalar action (a Discrete space has a few answers)
        self._scalar_actions: Dict[bytes, np.generic] = {}
        if inference_mode == "local":
            self._build_local_policy(policy_class)
            self.update_policy_weights()

    # --- the ExternalEnv calls ------------------------------------------------------------------
    def start_episode(self, episode_id: Optional[str] = None, training_enabled: bool = True) -> str:
        """Starts an episode; returns its id (`episode_id`, or one the server or client picks)."""
        request = pb.StartEpisodeRequest(episode_id=episode_id or "",
                                         training_disabled=not training_enabled)
        if self.policy is None:
            return self._call("StartEpisode", request).episode_id
        request.episode_id = episode_id or uuid.uuid4().hex
        self._queue(request.episode_id, pb.Call(start_episode=request))
        return request.episode_id

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The action for `observation`: the server's policy's (remote), or the local copy's,
        recorded on the server as a logged action (local)."""
        if self.policy is None:
            answer = self._request_action(pb.GetActionRequest(
                episode_id=episode_id, observation=values.encode_value(observation),
                reward=self._rewards.pop(episode_id, 0.0)))
            action = self._scalar_actions.get(answer)
            if action is None:
                action = self._action_of(pb.GetActionResponse.FromString(answer))
                if isinstance(action, np.generic) and len(self._scalar_actions) < MAX_CACHED_ACTIONS:
                    self._scalar_actions[answer] = action
            return action
        if time.monotonic() - self._weights_pulled >= self.update_interval:
            self.update_policy_weights()
        if self.numpy_actor is not None:
            actions = self.numpy_actor.act(observation, self._explore)
        else:
            obs = np.asarray(observation)[None] if not isinstance(observation, (dict, tuple)) \
                else _batch_of_one(observation)
            actions, _, _ = self.policy.compute_actions(obs, explore=self._explore)
        action = self._adapter.env_action(self._adapter(actions), 0)
        self.log_action(episode_id, observation, action)
        return action

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action the application chose itself."""
        reward = self._rewards.pop(episode_id, 0.0)
        if self.policy is None:
            self._call("LogAction", pb.LogActionRequest(
                episode_id=episode_id, observation=values.encode_value(observation),
                action=values.encode_value(action), reward=reward))
            return
        with self._lock:
            steps = self._open_steps.get(episode_id)
            if steps is None:
                steps = self._open_steps[episode_id] = LoggedSteps(episode_id)
                self._calls.append(steps)
            steps.add(observation, action, reward)
            self._buffered_steps += 1
            full = self._buffered_steps >= self.report_every
        if full:
            self.flush(wait=False)

    def log_returns(self, episode_id: str, reward: float, info: Optional[dict] = None) -> None:
        """Adds `reward` to the episode's current step (`info` is not sent); the rewards travel
        with the episode's next call (no call of their own)."""
        self._rewards[episode_id] = self._rewards.get(episode_id, 0.0) + float(reward)

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """Ends the episode with its final observation (local mode: sends the buffered calls)."""
        request = pb.EndEpisodeRequest(episode_id=episode_id,
                                       observation=values.encode_value(observation),
                                       truncated=bool(truncated),
                                       reward=self._rewards.pop(episode_id, 0.0))
        if self.policy is None:
            self._call("EndEpisode", request)
        else:
            self._queue(episode_id, pb.Call(end_episode=request))
            self.flush()

    # --- local inference ------------------------------------------------------------------------
    def update_policy_weights(self) -> None:
        """Local mode: pulls the server's current weights into the local copy."""
        response = self._call("GetWeights", pb.WeightsRequest())
        self.policy.set_weights([values.tensor_array(t) for t in response.weights])
        if self._numpy_inference:
            if self.numpy_actor is None:
                self.numpy_actor = NumpyActor.from_policy(self.policy)
            else:  # the same policy's new weights; its draws go on from the same generator
                self.numpy_actor.load_weights(self.policy)
        self._weights_pulled = time.monotonic()

    def flush(self, wait: bool = True) -> None:
        """Local mode: sends the buffered calls (in order) in one Report. With `wait` False the
        Report goes out without waiting for the server's answer (the next flush waits for it
        before sending, so reports stay in order).

        Raises:
          PolicyServerError: the server refused one of them, or one of the report before; the
            calls before the refused one were applied.
        """
        with self._flush_lock:  # one report at a time, in order
            with self._lock:
                calls, self._calls = self._calls, []
                self._open_steps, self._buffered_steps = {}, 0
            in_flight, self._report_in_flight = self._report_in_flight, None
            if in_flight is not None:
                self._result("Report", in_flight)
            if not calls:
                return
            request = pb.ReportRequest(calls=[call if isinstance(call, pb.Call) else _log_actions_call(call)
                                              for call in calls])
            if wait:
                self._call("Report", request)
                return
            self._report_in_flight = self._stub.Report.future(
                request, metadata=self._metadata, timeout=self.timeout)

    def close(self) -> None:
        """Sends what is buffered (local mode: rewards not yet sent with a step too) and closes
        the channel."""
        try:
            if self.policy is not None:
                for episode_id, reward in list(self._rewards.items()):
                    self._queue(episode_id, pb.Call(log_returns=pb.LogReturnsRequest(
                        episode_id=episode_id, reward=reward)))
                self._rewards.clear()
                self.flush()
        finally:
            if self._stream is not None:
                self._stream.close()
            self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _queue(self, episode_id: str, call: pb.Call) -> None:
        """Local mode: buffers one call of the episode, after its steps buffered so far."""
        with self._lock:
            self._open_steps.pop(episode_id, None)
            self._calls.append(call)

    def _request_action(self, request: pb.GetActionRequest) -> bytes:
        """A remote GetAction's serialized answer, from the action stream, or from a GetAction
        call when another thread is using the stream (or the server has none)."""
        if not self._stream_supported or not self._stream_lock.acquire(blocking=False):
            return self._call("GetAction", request, self._get_action_bytes)
        try:
            if self._stream is None:
                self._stream = ActionStream(self._open_stream_channel, self._metadata)
            try:
                return self._stream.call(request)
            except grpc.RpcError as exc:
                self._stream.close()
                self._stream = None
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:  # a server without streams
                    self._stream_supported = False
                    return self._call("GetAction", request, self._get_action_bytes)
                raise _server_error("GetActionStream", exc) from None
        finally:
            self._stream_lock.release()

    def _action_of(self, response: pb.GetActionResponse) -> Any:
        if len(response.action.leaves) == 1:
            return _plain(values.tensor_array(response.action.leaves[0]))
        return values.decode_value(response.action, self._remote_action_space(), "action")

    def _remote_action_space(self):
        """The server's action space (read once: a structured action is unflattened by it)."""
        if self._action_space is None:
            info = self._call("PolicyInfo", pb.PolicyInfoRequest())
            self._action_space = values.space_from_json(info.action_space_json)
        return self._action_space

    def _build_local_policy(self, policy_class: Any) -> None:
        info = self._call("PolicyInfo", pb.PolicyInfoRequest())
        if info.observation_filter not in ("NoFilter", ""):
            raise errors.InvalidConfigError(
                f"local inference needs the server's observation_filter to be NoFilter, but it is "
                f"{info.observation_filter!r} (its statistics live in the trainer); use "
                "inference_mode='remote'")
        if policy_class is None:
            module_name, _, class_name = info.policy_class.partition(":")
            if not module_name.startswith("tfrl.") or "." in class_name:
                raise errors.NotSupportedError(
                    f"the server's policy class {info.policy_class!r} is not one of tfrl's; pass "
                    "policy_class= to build it locally")
            policy_class = getattr(importlib.import_module(module_name), class_name)
        config = json.loads(info.config_json)
        config.pop("seed", None)
        observation_space = values.space_from_json(info.observation_space_json)
        action_space = values.space_from_json(info.action_space_json)
        self.policy = policy_class(observation_space, action_space, config)
        if hasattr(self.policy, "compile_actions_with_xla"):
            # one observation per call: one XLA compile serves every call (see TFPolicy)
            self.policy.compile_actions_with_xla(True)
        # the server sends the values its worker acts with (ServingSettings)
        serving = ServingSettings.from_config(config)
        self._explore = serving.explore
        self._adapter = ActionAdapter(action_space, "PolicyClient",
                                      clip_actions=serving.clip_actions,
                                      normalize_actions=serving.normalize_actions)

    def _call(self, method: str, request, rpc: Optional[Callable] = None) -> Any:
        """`method` called with `request` (through `rpc` when given, else the stub's), its
        failure raised as PolicyServerError."""
        try:
            return (rpc or getattr(self._stub, method))(request, metadata=self._metadata,
                                                        timeout=self.timeout)
        except grpc.RpcError as exc:
            raise _server_error(method, exc) from None

    @staticmethod
    def _result(method: str, future) -> Any:
        try:
            return future.result()
        except grpc.RpcError as exc:
            raise _server_error(method, exc) from None


def _log_actions_call(steps: LoggedSteps) -> pb.Call:
    """Local mode: an episode's consecutive steps as one `log_actions` call."""
    observations, actions, rewards = steps.columns()
    return pb.Call(log_actions=pb.LogActionsRequest(
        episode_id=steps.episode_id, observations=values.encode_value(observations),
        actions=values.encode_value(actions), rewards=rewards if any(rewards) else ()))


class MultiAgentPolicyClient(PolicyClient):
    """Calls a MultiAgentPolicyServer with one value per agent (remote inference only):

        client = MultiAgentPolicyClient("localhost:9900")
        episode_id = client.start_episode()
        actions = client.get_action(episode_id, {"a": obs_a, "b": obs_b})
        client.log_returns(episode_id, {"a": 1.0, "b": 0.0})
        client.end_episode(episode_id, {"a": obs_a, "b": obs_b})

    Agent ids travel as strings (`str(agent_id)`); the actions come back keyed by the ids of the
    observation dict. Rewards are sent with the episode's next call. Arguments as
    PolicyClient's (`update_interval`, `report_every`, `policy_class` and `numpy_inference` are
    local-mode settings and do not apply).

    Raises:
      NotSupportedError: inference_mode "local" (local inference is single-agent only).
      InvalidConfigError: an unknown inference mode.
    """

    def __init__(self, address: str, inference_mode: str = "remote", **client_kwargs):
        if inference_mode == "local":
            raise errors.NotSupportedError(
                "MultiAgentPolicyClient infers remotely only: local inference is single-agent "
                "only; use inference_mode='remote'")
        super().__init__(address, inference_mode, **client_kwargs)
        self._agent_action_spaces: Optional[Dict[str, Any]] = None

    def start_episode(self, episode_id: Optional[str] = None, training_enabled: bool = True) -> str:
        """Starts an episode; returns its id (`episode_id`, or one the server picks)."""
        return super().start_episode(episode_id, training_enabled)

    def get_action(self, episode_id: str, observation_dict: Dict[Hashable, Any]) -> Dict[Hashable, Any]:
        """The server's policies' actions for the agents of `observation_dict`.

        Raises:
          ExternalEnvError: `observation_dict` is not a dict, or holds a value that cannot be
            sent.
          PolicyServerError: the server refused the call (an unknown agent or episode id, a
            value outside its space: INVALID_ARGUMENT).
        """
        keys = _agent_keys(observation_dict, "observation_dict")
        response = pb.GetActionResponse.FromString(self._request_action(pb.GetActionRequest(
            episode_id=episode_id, agent_observations=_encode_agents(observation_dict),
            agent_rewards=self._rewards.pop(episode_id, {}))))
        return {keys.get(key, key): self._agent_action(key, message)
                for key, message in response.agent_actions.items()}

    def log_action(self, episode_id: str, observation_dict: Dict[Hashable, Any],
                   action_dict: Dict[Hashable, Any]) -> None:
        """Records actions the application chose itself, one per agent of `observation_dict`.

        Raises:
          ExternalEnvError: a dict argument that is not a dict, or a value that cannot be sent.
          PolicyServerError: the server refused the call.
        """
        _agent_keys(observation_dict, "observation_dict")
        _agent_keys(action_dict, "action_dict")
        self._call("LogAction", pb.LogActionRequest(
            episode_id=episode_id, agent_observations=_encode_agents(observation_dict),
            agent_actions=_encode_agents(action_dict),
            agent_rewards=self._rewards.pop(episode_id, {})))

    def log_returns(self, episode_id: str, reward_dict: Dict[Hashable, float],
                    info_dict: Optional[dict] = None) -> None:
        """Adds each agent's reward to its current step (`info_dict` is not sent); the rewards
        travel with the episode's next call.

        Raises:
          ExternalEnvError: `reward_dict` is not a dict of numbers.
        """
        _agent_keys(reward_dict, "reward_dict")
        pending = self._rewards.setdefault(episode_id, {})
        for agent, reward in reward_dict.items():
            try:
                reward = float(reward)
            except (TypeError, ValueError):
                raise errors.ExternalEnvError(
                    f"the reward of agent {agent!r} must be a number, got {reward!r}") from None
            pending[str(agent)] = pending.get(str(agent), 0.0) + reward

    def end_episode(self, episode_id: str, observation_dict: Dict[Hashable, Any],
                    truncated: bool = False) -> None:
        """Ends the episode with the agents' final observations.

        Raises:
          ExternalEnvError: `observation_dict` is not a dict, or holds a value that cannot be
            sent.
          PolicyServerError: the server refused the call.
        """
        _agent_keys(observation_dict, "observation_dict")
        self._call("EndEpisode", pb.EndEpisodeRequest(
            episode_id=episode_id, agent_observations=_encode_agents(observation_dict),
            truncated=bool(truncated), agent_rewards=self._rewards.pop(episode_id, {})))

    def _agent_action(self, key: str, message: pb.SpaceValue) -> Any:
        if len(message.leaves) == 1:
            return _plain(values.tensor_array(message.leaves[0]))
        if self._agent_action_spaces is None:
            info = self._call("PolicyInfo", pb.PolicyInfoRequest())
            self._agent_action_spaces = {k: values.space_from_json(v)
                                         for k, v in info.agent_action_spaces_json.items()}
        return values.decode_value(message, self._agent_action_spaces[key], f"action of {key!r}")


def _agent_keys(value: Any, what: str) -> Dict[str, Hashable]:
    """str(agent id) -> agent id of a dict argument.

    Raises:
      ExternalEnvError: `value` is not a dict.
    """
    if not isinstance(value, dict):
        raise errors.ExternalEnvError(
            f"{what} must be a dict agent id -> value, got {type(value).__name__}")
    return {str(agent): agent for agent in value}


def _encode_agents(value_dict: Dict[Hashable, Any]) -> Dict[str, pb.SpaceValue]:
    return {str(agent): values.encode_value(value) for agent, value in value_dict.items()}


def _server_error(method: str, exc: grpc.RpcError) -> errors.PolicyServerError:
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    name = code.name if code is not None else "UNKNOWN"
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    if name == "CANCELLED":
        # This client cancels no call itself (only its action stream, at close()): a cancelled
        # call is one a stopping server cut off, which callers learn as they learn of one that
        # it refused.
        name, details = "UNAVAILABLE", f"the server stopped during the call ({details})"
    return errors.PolicyServerError(f"{method} failed with {name}: {details}", name)


def _plain(value: Any) -> Any:
    """A 0-d array as its numpy scalar (a Discrete action), anything else unchanged."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _batch_of_one(observation: Any) -> Any:
    import tree

    return tree.map_structure(lambda leaf: np.asarray(leaf)[None], observation)
