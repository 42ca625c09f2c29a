"""PolicyService: the gRPC service (proto/policy_service.proto) in front of a PolicyServer.

Each RPC a client makes becomes the ExternalEnv call of the same name on the PolicyServer
(policy_server.py) it serves: StartEpisode, GetAction (and the long-lived GetActionStream),
LogAction, LogReturns, EndEpisode, a `Report` of several of them in order, PolicyInfo and
GetWeights. Requests arrive as raw bytes and are parsed here, so one that does not parse is
answered with INVALID_ARGUMENT (gRPC's own deserialisation would answer INTERNAL); a call the
env refuses ends with the status code of its named error (`ActionTimeoutError`:
DEADLINE_EXCEEDED, `NotSupportedError`: FAILED_PRECONDITION, the others INVALID_ARGUMENT; any
of them UNAVAILABLE once the server has closed). The server's token and what each request means
(single- or multi-agent values) are the PolicyServer's: the servicer asks it (`check_token`,
`decode_observation`, `decode_action`, `decode_reward`, `action_response`).

It also holds what both ends of the wire agree on besides the messages: the service name, the
metadata key of the token and the default message size limit, which the clients
(policy_client.py, action_stream.py) read from here.
"""
from __future__ import annotations

from typing import Any, Callable, Union

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from tfrl import errors
from tfrl.serving import values
from tfrl.serving.proto import policy_service_pb2 as pb

SERVICE_NAME = "tfrl.serving.PolicyService"
TOKEN_METADATA_KEY = "tfrl-policy-token"
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

_STATUS = {
    errors.ActionTimeoutError: grpc.StatusCode.DEADLINE_EXCEEDED,
    errors.ExternalEnvError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidObservationError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.ActionOutOfSpaceError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotSupportedError: grpc.StatusCode.FAILED_PRECONDITION,
}

# method -> (request message, response message)
METHODS = {
    "StartEpisode": (pb.StartEpisodeRequest, pb.StartEpisodeResponse),
    "GetAction": (pb.GetActionRequest, pb.GetActionResponse),
    "LogAction": (pb.LogActionRequest, pb.Empty),
    "LogReturns": (pb.LogReturnsRequest, pb.Empty),
    "EndEpisode": (pb.EndEpisodeRequest, pb.Empty),
    "Report": (pb.ReportRequest, pb.ReportResponse),
    "PolicyInfo": (pb.PolicyInfoRequest, pb.PolicyInfoResponse),
    "GetWeights": (pb.WeightsRequest, pb.WeightsResponse),
}


def policy_service_handler(server) -> grpc.GenericRpcHandler:
    """The PolicyService's handler for a `grpc.Server`, serving `server` (a PolicyServer or
    MultiAgentPolicyServer)."""
    return _method_handlers(_Servicer(server))


def _method_handlers(servicer: "_Servicer"):
    """The service's handlers, taking raw bytes: a request that does not parse is answered with
    INVALID_ARGUMENT (gRPC's own deserialisation would answer INTERNAL)."""
    def handler(name: str, request_class):
        method = getattr(servicer, name)

        def handle(raw: bytes, context):
            return method(_parsed(name, request_class, raw, context), context)

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=None, response_serializer=_serialized)

    handlers = {name: handler(name, request) for name, (request, _) in METHODS.items()}
    handlers["GetActionStream"] = grpc.stream_stream_rpc_method_handler(
        servicer.GetActionStream, request_deserializer=None, response_serializer=_serialized)
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


def _serialized(message) -> bytes:
    return message if type(message) is bytes else message.SerializeToString()


def _parsed(name: str, request_class, raw: bytes, context):
    """The request message in `raw`; a request that does not parse ends the call with
    INVALID_ARGUMENT."""
    request = request_class()
    try:
        request.ParseFromString(raw)
    except DecodeError as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                      f"{name}: the request is not a {request_class.DESCRIPTOR.full_name} "
                      f"message ({exc}); build it from policy_service.proto")
    return request


class _Servicer:
    """Each RPC as the ExternalEnv call of the same name, errors as status codes."""

    def __init__(self, server):
        self.server = server

    def _serve(self, context, call: Callable[[], Any]) -> Any:
        self.server.check_token(context)
        try:
            return call()
        except errors.TfrlError as exc:
            self._abort(context, exc)

    def _abort(self, context, exc: errors.TfrlError) -> None:
        code = _STATUS.get(type(exc), grpc.StatusCode.INVALID_ARGUMENT)
        if self.server.closed:
            code = grpc.StatusCode.UNAVAILABLE
        context.abort(code, str(exc))

    def GetActionStream(self, raw_requests, context):
        self.server.check_token(context)
        for raw in raw_requests:
            request = _parsed("GetActionStream", pb.GetActionRequest, raw, context)
            try:
                answer = self._action(request)
            except errors.TfrlError as exc:
                self._abort(context, exc)
            yield answer

    def StartEpisode(self, request, context):
        env = self.server
        return self._serve(context, lambda: pb.StartEpisodeResponse(episode_id=env.start_episode(
            request.episode_id or None, training_enabled=not request.training_disabled)))

    def GetAction(self, request, context):
        return self._serve(context, lambda: self._action(request))

    def _action(self, request) -> Union[pb.GetActionResponse, bytes]:
        """The answer to a GetAction request: inline in one step where it is the common case,
        else through `get_action`."""
        env = self.server
        answer = env.inline_answer(request)
        if answer is not None:
            return answer
        observation = env.decode_observation(request)
        action = env.get_action(request.episode_id, observation, env.decode_reward(request))
        return env.action_response(action)

    def LogAction(self, request, context):
        return self._serve(context, lambda: _log_action(self.server, request) or pb.Empty())

    def LogReturns(self, request, context):
        return self._serve(context, lambda: self.server.log_returns(
            request.episode_id, self.server.decode_reward(request)) or pb.Empty())

    def EndEpisode(self, request, context):
        return self._serve(context, lambda: _end_episode(self.server, request) or pb.Empty())

    def Report(self, request, context):
        env = self.server

        def apply_all():
            for index, call in enumerate(request.calls):
                try:
                    _apply(env, call)
                except errors.TfrlError as exc:
                    raise type(exc)(f"call {index} of {len(request.calls)} in the report "
                                    f"({call.WhichOneof('call')}): {exc}; the calls before it "
                                    "were applied") from exc
            return pb.ReportResponse(applied=len(request.calls))

        return self._serve(context, apply_all)

    def PolicyInfo(self, request, context):
        return self._serve(context, self.server.policy_info)

    def GetWeights(self, request, context):
        return self._serve(context, self.server.weights)


def _log_action(env, request) -> None:
    observation = env.decode_observation(request)
    action = env.decode_action(request)
    env.log_action(request.episode_id, observation, action, env.decode_reward(request))


def _end_episode(env, request) -> None:
    observation = env.decode_observation(request)
    env.end_episode(request.episode_id, observation, bool(request.truncated),
                    env.decode_reward(request))


def _apply(env, call) -> None:
    kind = call.WhichOneof("call")
    if kind == "start_episode":
        if not call.start_episode.episode_id:
            raise errors.ExternalEnvError("a reported start_episode must name its episode id")
        env.start_episode(call.start_episode.episode_id,
                          training_enabled=not call.start_episode.training_disabled)
    elif kind == "log_action":
        _log_action(env, call.log_action)
    elif kind == "log_returns":
        env.log_returns(call.log_returns.episode_id, env.decode_reward(call.log_returns))
    elif kind == "end_episode":
        _end_episode(env, call.end_episode)
    elif kind == "log_actions":
        if env.multi_agent:
            raise errors.ExternalEnvError(
                "this policy server is multi-agent: log each step with log_action (agent_* fields)")
        steps = call.log_actions
        env.log_actions(steps.episode_id,
                        values.decode_value(steps.observations, env.observation_space,
                                            "observations"),
                        values.decode_value(steps.actions, env.action_space, "actions"),
                        np.array(steps.rewards, np.float64))
    else:
        raise errors.ExternalEnvError("an empty call in the report")
