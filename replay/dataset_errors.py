"""Typed TensorFlow errors from ops whose work runs in Python: the stream generators of
`replay.ReplayDataset` (this is part of the dataset's TensorFlow side, beside
`replay.dataset_signature`; the rest of the replay core needs no TensorFlow) and
`replay.reverb.TFClient`'s ops, which share it.

TensorFlow runs a `tf.numpy_function` in a graph (a `tf.function`, a TF1 session) through its
PyFunc kernel, which turns every Python exception other than ValueError/TypeError,
StopIteration, MemoryError and NotImplementedError into UnknownError: a `tf.errors.NotFoundError`
raised inside becomes UnknownError at `session.run`. Reverb's ops are C++ kernels that fail with
the server's status code, and its users catch those codes (`tf.errors.NotFoundError` for an
unknown table, `tf.errors.InternalError` for a dtype mismatch).

`numpy_function_with_codes` keeps the codes: in a graph, the Python function returns a token
instead of raising, and a small kernel registered through TensorFlow's C API (`ctypes`, no
compiled code of ours) fails with the code and message stored under that token; the outputs
depend on that check. `pend_error` and `check_pending` do the same for a
`tf.data.Dataset.from_generator` whose generator yields a token beside each element (tf.data
runs generators through the same PyFunc kernel, eagerly too). Eagerly, `tf.numpy_function`
calls the function directly and its exceptions reach the caller as they are. Where the C API
cannot be loaded (another platform's library name), it is `tf.numpy_function`, codes lost as
before.
"""
from __future__ import annotations

import ctypes
import itertools
import logging
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from replay import errors

_OP_NAME = "ReplayRaisePendingError"
_log = logging.getLogger(__name__)

# Token -> (tf error code, message), stored by a failed call and taken by its check op.
_pending: Dict[int, Tuple[int, str]] = {}
_tokens = itertools.count(1)
_register_lock = threading.Lock()
_registered: Optional[bool] = None
# The C callbacks TensorFlow keeps pointers to: they must live as long as the process.
_callbacks: List[object] = []


def error_code(exc: BaseException) -> Optional[int]:
    """The tf.errors code an exception stands for: a tf.errors.OpError's own, a replay error's
    (by its gRPC code name); None for any other exception (TensorFlow maps those itself)."""
    if isinstance(exc, tf.errors.OpError):
        return exc.error_code
    if isinstance(exc, errors.ReplayError):
        return getattr(tf.errors, exc.grpc_code, tf.errors.UNKNOWN)
    return None


def numpy_function_with_codes(func: Callable, inp: Sequence, Tout: Sequence[tf.DType],
                              name: Optional[str] = None) -> List[tf.Tensor]:
    """`tf.numpy_function(func, inp, Tout, stateful=True)` (a list of outputs, one per `Tout`)
    whose run fails with the tf.errors code of `func`'s exception (see `error_code`) in a graph
    too, with the exception's message. Other exceptions behave as in `tf.numpy_function`.

    Raises:
      Whatever `tf.numpy_function` raises while building the op.
    """
    Tout = [tf.as_dtype(d) for d in Tout]
    if tf.executing_eagerly() or not _register():
        outputs = tf.numpy_function(func, inp, Tout, stateful=True, name=name)
        return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]

    def call_keeping_code(*args):
        try:
            outputs = func(*args)
        except Exception as exc:  # noqa: BLE001 - handed to the check op, or re-raised
            token = pend_error(exc)
            if token is None:
                raise
            # Outputs of the right dtypes that nothing reads: the check op fails first.
            return [np.int64(token)] + [_placeholder(d) for d in Tout]
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        return [np.int64(0)] + outputs

    token, *outputs = tf.numpy_function(call_keeping_code, inp, [tf.int64] + Tout, stateful=True,
                                        name=name)
    return check_pending(token, outputs)


def typed_errors_available() -> bool:
    """Whether the check op is registered (registering it on the first call); where it is not,
    `pend_error` stores nothing and the codes read as UnknownError in graphs."""
    return _register()


def pend_error(exc: BaseException) -> Optional[int]:
    """Stores `exc`'s tf.errors code and message for a check op and returns its token (> 0);
    None when `exc` stands for no code (see `error_code`) or the check op is not available:
    then the caller re-raises it."""
    code = error_code(exc)
    if code is None or not _register():
        return None
    token = next(_tokens)
    _pending[token] = (int(code), str(exc.message if isinstance(exc, tf.errors.OpError) else exc))
    return token


def check_pending(token: tf.Tensor, outputs: Any) -> Any:
    """In a graph (a `tf.function`, a tf.data function): `outputs` (any nest of tensors), after
    a check that fails with the error `pend_error` stored under `token` when `token` is not 0.

    The check op runs only then (in a `tf.cond` branch): its kernel is a Python function, which
    TensorFlow's threads must not call while the interpreter exits (a dataset still streaming
    at exit would otherwise crash the process)."""

    def fail():
        with tf.device("/device:CPU:0"):
            check = tf.compat.v1.get_default_graph().create_op(_OP_NAME, [token], [], name="raise_pending_error")
        with tf.control_dependencies([check]):
            return tf.identity(token)

    checked = tf.cond(token > 0, fail, lambda: tf.identity(token))
    with tf.control_dependencies([checked]):
        return tf.nest.map_structure(tf.identity, outputs)


def _placeholder(dtype: tf.DType):
    return np.array(b"", dtype=object) if dtype == tf.string else np.zeros((), dtype.as_numpy_dtype)


def _register() -> bool:
    """Registers the check op and its CPU kernel once per process; False where the C API is not
    available (then the codes are lost, as with a plain tf.numpy_function)."""
    global _registered
    with _register_lock:
        if _registered is None:
            try:
                _registered = _register_op()
            except (OSError, AttributeError) as exc:
                _log.warning("typed errors from replay ops are not available here (%s); "
                             "their failures read as UnknownError in graphs", exc)
                _registered = False
        return _registered


def _register_op() -> bool:
    lib = ctypes.CDLL(os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2"))
    vp = ctypes.c_void_p
    shape_fn_type = ctypes.CFUNCTYPE(None, vp, vp)
    compute_type = ctypes.CFUNCTYPE(None, vp, vp)
    for fn, argtypes, restype in (
            (lib.TF_NewStatus, [], vp),
            (lib.TF_DeleteStatus, [vp], None),
            (lib.TF_SetStatus, [vp, ctypes.c_int, ctypes.c_char_p], None),
            (lib.TF_GetCode, [vp], ctypes.c_int),
            (lib.TF_Message, [vp], ctypes.c_char_p),
            (lib.TF_NewOpDefinitionBuilder, [ctypes.c_char_p], vp),
            (lib.TF_OpDefinitionBuilderAddInput, [vp, ctypes.c_char_p], None),
            (lib.TF_OpDefinitionBuilderSetIsStateful, [vp, ctypes.c_bool], None),
            (lib.TF_OpDefinitionBuilderSetShapeInferenceFunction, [vp, shape_fn_type], None),
            (lib.TF_RegisterOpDefinition, [vp, vp], None),
            # no create or delete function (NULL): TensorFlow builds and destroys the kernel
            # without calling Python, also while the interpreter exits
            (lib.TF_NewKernelBuilder, [ctypes.c_char_p, ctypes.c_char_p, vp, compute_type, vp], vp),
            (lib.TF_RegisterKernelBuilder, [ctypes.c_char_p, vp, vp], None),
            (lib.TF_GetInput, [vp, ctypes.c_int, ctypes.POINTER(vp), vp], None),
            (lib.TF_TensorData, [vp], vp),
            (lib.TF_DeleteTensor, [vp], None),
            (lib.TF_OpKernelContext_Failure, [vp, vp], None)):
        fn.argtypes, fn.restype = argtypes, restype

    def compute(_state, context):
        status = lib.TF_NewStatus()
        try:
            tensor = vp()
            lib.TF_GetInput(context, 0, ctypes.byref(tensor), status)
            if lib.TF_GetCode(status) != 0:
                lib.TF_OpKernelContext_Failure(context, status)
                return
            token = ctypes.cast(lib.TF_TensorData(tensor), ctypes.POINTER(ctypes.c_int64))[0]
            lib.TF_DeleteTensor(tensor)
            pending = _pending.pop(token, None) if token else None
            if pending is not None:
                code, message = pending
                lib.TF_SetStatus(status, code, message.encode("utf-8", "replace"))
                lib.TF_OpKernelContext_Failure(context, status)
        finally:
            lib.TF_DeleteStatus(status)

    shape_fn = shape_fn_type(lambda _context, _status: None)  # no outputs to shape
    compute_fn = compute_type(compute)
    _callbacks.extend([shape_fn, compute_fn])

    status = lib.TF_NewStatus()
    try:
        builder = lib.TF_NewOpDefinitionBuilder(_OP_NAME.encode())
        lib.TF_OpDefinitionBuilderAddInput(builder, b"token: int64")
        lib.TF_OpDefinitionBuilderSetIsStateful(builder, True)
        lib.TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, shape_fn)
        lib.TF_RegisterOpDefinition(builder, status)
        if lib.TF_GetCode(status) != 0:
            raise OSError(f"registering {_OP_NAME}: {lib.TF_Message(status).decode()}")
        kernel = lib.TF_NewKernelBuilder(_OP_NAME.encode(), b"CPU", None, compute_fn, None)
        lib.TF_RegisterKernelBuilder(f"{_OP_NAME}_CPU".encode(), kernel, status)
        if lib.TF_GetCode(status) != 0:
            raise OSError(f"registering the kernel of {_OP_NAME}: {lib.TF_Message(status).decode()}")
    finally:
        lib.TF_DeleteStatus(status)
    return True
