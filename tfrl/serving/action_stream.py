"""ActionStream: a remote PolicyClient's actions on one long-lived GetActionStream call.

A PolicyClient in remote inference mode (policy_client.py) asks for each action on this stream
rather than with a GetAction call of its own: one write and one read on the stream make a round
trip. The stream runs on gRPC's asyncio API, driven from the calling thread. A stream that ends
or is cancelled raises a `grpc.RpcError` whose status says why (UNAVAILABLE: the server ended
it; CANCELLED: the server or `close` cancelled it), which the client turns into its
PolicyServerError.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

import grpc

from tfrl.serving.policy_service import SERVICE_NAME
from tfrl.serving.proto import policy_service_pb2 as pb


class ActionStream:
    """One GetActionStream call: each request written is answered by the next response.

    It runs on gRPC's asyncio API, driven from the calling thread: a round trip is one
    `run_until_complete` of a write and a read on the stream's own event loop, so no other
    Python thread stands between the caller and the wire (the blocking API's stream hands each
    request to a thread of its own, a hand-off that cost about a tenth of a round trip). One
    thread uses it at a time (the client's stream lock); `close` may come from any thread.

    A call waits for its answer as long as the server lets it (the server's `action_timeout_s`
    ends a wait for the trainer with DEADLINE_EXCEEDED)."""

    def __init__(self, open_channel: Callable[[], Any], metadata):
        self._loop = asyncio.new_event_loop()
        self._state_lock = threading.Lock()
        self._busy = self._closing = False
        self._channel, self._call = self._loop.run_until_complete(
            self._open(open_channel, metadata))

    @staticmethod
    async def _open(open_channel, metadata):
        channel = open_channel()  # made here: an asyncio channel belongs to the running loop
        # answers stay bytes: the client parses each distinct one once
        call = channel.stream_stream(
            f"/{SERVICE_NAME}/GetActionStream",
            request_serializer=pb.GetActionRequest.SerializeToString,
            response_deserializer=None)(metadata=metadata)
        return channel, call

    def call(self, request: pb.GetActionRequest) -> bytes:
        """The serialized answer to `request`.

        Raises:
          grpc.RpcError: the stream ended (the status says why; CANCELLED when the server or
            `close` cancelled it).
        """
        with self._state_lock:
            if self._closing:
                raise _StreamEnded()
            self._busy = True
        try:
            return self._loop.run_until_complete(self._round_trip(request))
        finally:
            with self._state_lock:
                self._busy = False
                shut_down = self._closing
            if shut_down:
                self._shut_down()

    async def _round_trip(self, request: pb.GetActionRequest) -> bytes:
        try:
            try:
                await self._call.write(request)
            except grpc.RpcError as exc:
                # gRPC's asyncio API fails a write to a stream the server has ended (a server
                # stopping) with INTERNAL; the request never left
                if exc.code() == grpc.StatusCode.INTERNAL:
                    raise _StreamEnded() from None
                raise
            answer = await self._call.read()
        except asyncio.CancelledError:  # how gRPC's asyncio API reports a cancelled call
            raise _StreamCancelled() from None
        except asyncio.InvalidStateError:  # written after the stream ended
            raise _StreamEnded() from None
        if answer is grpc.aio.EOF:
            raise _StreamEnded()
        return answer

    def close(self) -> None:
        """Ends the stream; a call waiting on it from another thread ends with CANCELLED, and
        that thread releases the rest."""
        with self._state_lock:
            if self._closing:
                return
            self._closing = True
            busy = self._busy
        if busy:
            self._loop.call_soon_threadsafe(self._call.cancel)
        else:
            self._shut_down()

    def _shut_down(self) -> None:
        self._call.cancel()
        self._loop.run_until_complete(self._channel.close())
        self._loop.close()


class _StreamCancelled(grpc.RpcError):
    """The action stream was cancelled: by the server, or by the client's own `close`."""

    def code(self):
        return grpc.StatusCode.CANCELLED

    def details(self):
        return "the action stream was cancelled"


class _StreamEnded(grpc.RpcError):
    """The server closed the action stream without a status (it is shutting down)."""

    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return "the server ended the action stream"
