"""Named errors of the tfrl agent toolkit.

Every error a user can cause in `tfrl` (bad configuration, unsupported spaces, malformed batches,
unusable checkpoints) is one of these, so callers can catch them by name. Messages say what was
wrong and what to do about it. Nothing already stored is changed when one is raised.
"""


class TfrlError(Exception):
    """Base class of every error raised on purpose by `tfrl`."""


class InvalidConfigError(TfrlError, ValueError):
    """A configuration value (policy config, model config, schedule) is missing or malformed."""


class UnsupportedSpaceError(TfrlError, ValueError):
    """An observation or action space that a model, preprocessor or distribution cannot handle."""


class InvalidBatchError(TfrlError, ValueError):
    """A SampleBatch is malformed or lacks a column that the caller needs."""


class UnknownModelError(InvalidConfigError, KeyError):
    """A `custom_model` name was used that was never registered with the ModelCatalog."""

    def __str__(self):  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class NotSupportedError(TfrlError, NotImplementedError):
    """An operation that the object cannot do (for example the KL of a squashed Gaussian)."""


class FrameworkNotAvailableError(TfrlError, ImportError):
    """A class of a framework tfrl does not run (a classic torch policy) was instantiated; an
    ImportError, as classic RLlib raises when torch is not installed."""


class CheckpointError(TfrlError):
    """A policy state or checkpoint is missing, unreadable, or does not match the policy."""


class PickleCheckpointError(CheckpointError):
    """A checkpoint in the pickle format of older tfrl versions (`trainer_state.pkl`, pickled
    worker state). Refused without being read, because loading a pickle can run code."""


class EnvError(TfrlError):
    """Base class of problems caused by an environment."""


class UnknownEnvError(EnvError, InvalidConfigError):
    """An env name that is neither registered with `register_env` nor a gymnasium id."""


class InvalidEnvError(EnvError, TypeError):
    """An object used as an env lacks reset/step or gymnasium spaces."""


class InvalidObservationError(EnvError, ValueError):
    """An env returned an observation holding NaN or infinity."""


class ActionOutOfSpaceError(EnvError, ValueError):
    """A policy chose an action outside the env's action space."""


class EnvCrashError(EnvError, RuntimeError):
    """An env raised an exception in reset() or step(); the worker holding it must be recreated."""


class ExternalEnvError(EnvError, ValueError):
    """A call of an ExternalEnv (or of a PolicyClient) that cannot be carried out: an unknown or
    finished episode id, too many episodes at once, a bad reward, a closed env, or no action in
    time. Over gRPC it is INVALID_ARGUMENT (or DEADLINE_EXCEEDED, UNAVAILABLE)."""


class ActionTimeoutError(ExternalEnvError):
    """An ExternalEnv's `get_action` got no action within its `action_timeout_s`: the trainer is
    not sampling. Over gRPC it is DEADLINE_EXCEEDED."""


class PolicyServerError(TfrlError, RuntimeError):
    """A policy server refused or failed a PolicyClient call. `code` is the gRPC status code's
    name (INVALID_ARGUMENT, UNAUTHENTICATED, DEADLINE_EXCEEDED, UNAVAILABLE, ...) and the message
    is the server's. UNAVAILABLE: the server is not serving, or stopped during the call."""

    def __init__(self, message: str, code: str = "UNKNOWN"):
        super().__init__(message)
        self.code = code


class WorkerCrashedError(TfrlError, RuntimeError):
    """A remote rollout worker died and could not be recreated."""


class ReplayStartTimeoutError(TfrlError, TimeoutError):
    """A replay server actor did not start within `replay_start_timeout_s` (no node that offers
    `replay_resources` took it, or its node died while it started)."""


class LearnerError(TfrlError, RuntimeError):
    """The learner thread of an asynchronous optimizer failed; the cause is its error. Fix that
    cause (often a loss that does not fit the sampled batch) and start the trainer again."""


class OfflineDataError(TfrlError):
    """Base class of problems with recorded experience (the `input` / `output` config keys)."""


class NoInputFilesError(OfflineDataError, InvalidConfigError):
    """An `input` directory, glob or file list that names no readable experience file."""


class CorruptRecordError(OfflineDataError, IOError):
    """A recorded experience file that is truncated or corrupted. `path` and `offset` (the byte
    offset of the first bad record) say where; `input_skip_corrupt: True` skips the rest of such
    a file instead of stopping."""

    def __init__(self, message: str, path: str = "", offset: int = -1):
        super().__init__(message)
        self.path = path
        self.offset = offset

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class UnsupportedRecordError(OfflineDataError, ValueError):
    """A recorded batch that tfrl will not read, such as a classic RLlib JSON column packed with
    pickle (reading it could run code)."""


class ReplayInputError(OfflineDataError):
    """A replay table used as `input` (tfrl/offline/replay_input.py) gave no batch: for example
    no sample within the input's `timeout_s` (an empty table)."""


class ReplayInputUnreachableError(ReplayInputError, ConnectionError):
    """No replay server answers at the address an `input` replay table names."""


class InvalidReplayInputError(ReplayInputError, InvalidConfigError):
    """An `input` replay table that cannot be read as SampleBatches: a malformed spelling, a
    refused token, an unknown table, or items whose columns are not a SampleBatch's."""
