"""Checks for tests and example scripts: nested numeric comparison (`check`), "did the run
reach its reward" (`check_learning_achieved`) and the loop over TensorFlow framework names
(`framework_iterator`). Classic RLlib scripts reach them as `ray.rllib.utils.test_utils`
(`tfrl.rllib.utils.test_utils`); they sit in the bottom layer and know no trainer."""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from tfrl import errors
from tfrl.config.merge import TF_FRAMEWORKS

logger = logging.getLogger(__name__)

REWARD_METRIC = "episode_reward_mean"


def _to_numpy(value):
    """Tensors and variables (eager) as numpy arrays; anything else unchanged."""
    numpy = getattr(value, "numpy", None)
    if callable(numpy) and not isinstance(value, np.ndarray):
        return numpy()
    return value


def _compare_numbers(x, y, decimals: int, atol: Optional[float], rtol: Optional[float],
                     false: bool) -> None:
    try:
        if atol is None and rtol is None:
            np.testing.assert_almost_equal(x, y, decimal=decimals)
        else:
            np.testing.assert_allclose(x, y, atol=0 if atol is None else atol,
                                       rtol=1e-7 if rtol is None else rtol)
    except AssertionError:
        if not false:
            raise
    else:
        if false:
            raise AssertionError(f"x ({x}) is the same as y ({y}), but false=True wants them "
                                 "to differ")


def check(x: Any, y: Any, decimals: int = 5, atol: Optional[float] = None,
          rtol: Optional[float] = None, false: bool = False) -> None:
    """Asserts that `x` equals `y` (the expected value), recursively through dicts (same keys),
    lists and tuples (same lengths): bools by truth, None / str / int exactly, object arrays
    element by element, other numbers and arrays (TensorFlow tensors included) to `decimals`
    decimal places, or within `atol` + `rtol` * |y| when either tolerance is given (the other
    then defaults to 0 and 1e-7). With `false=True` the leaves must differ instead.

    Raises:
      AssertionError: the values (or their structures) do not match as asked.
    """
    if isinstance(x, dict):
        if not isinstance(y, dict):
            raise AssertionError(f"x is a dict, y is not: y={y!r}")
        missing, extra = set(x) - set(y), set(y) - set(x)
        if missing or extra:
            raise AssertionError(f"the dicts' keys differ: only in x {sorted(map(str, missing))}, "
                                 f"only in y {sorted(map(str, extra))}")
        for key, value in x.items():
            check(value, y[key], decimals=decimals, atol=atol, rtol=rtol, false=false)
    elif isinstance(x, (tuple, list)):
        if not isinstance(y, (tuple, list)):
            raise AssertionError(f"x is a {type(x).__name__}, y is not: y={y!r}")
        if len(x) != len(y):
            raise AssertionError(f"x has {len(x)} items, y {len(y)}: y={y!r}")
        for a, b in zip(x, y):
            check(a, b, decimals=decimals, atol=atol, rtol=rtol, false=false)
    elif isinstance(x, (bool, np.bool_)):
        if (bool(x) is bool(y)) is false:
            raise AssertionError(f"x is {bool(x)}, y is {bool(y)}"
                                 + (" (false=True wants them to differ)" if false else ""))
    elif x is None or y is None or isinstance(x, (str, int)):
        if (x == y) is false:
            raise AssertionError(f"x ({x!r}) {'==' if false else '!='} y ({y!r})")
    elif getattr(x, "dtype", None) == np.dtype(object):
        try:
            np.testing.assert_array_equal(x, y)
        except AssertionError:
            if not false:
                raise
        else:
            if false:
                raise AssertionError(f"x ({x}) is the same as y ({y}), but false=True wants "
                                     "them to differ")
    else:
        _compare_numbers(_to_numpy(x), _to_numpy(y), decimals, atol, rtol, false)


def _last_results(tune_results) -> list:
    """The last result dict of every trial: of an ExperimentAnalysis (`tune.run`), a ResultGrid
    (`Tuner.fit`), a list of trials, or one result dict."""
    if isinstance(tune_results, dict):
        return [tune_results]
    trials = getattr(tune_results, "trials", None)
    if trials is not None:
        return [t.last_result for t in trials]
    return [getattr(r, "metrics", r) for r in tune_results]


def check_learning_achieved(tune_results, min_reward: float, evaluation: bool = False) -> None:
    """Asserts, as classic RLlib's example scripts do at their end, that the first trial's last
    result reached `min_reward` in `episode_reward_mean` (of `result["evaluation"]` with
    `evaluation=True`); prints "ok" when it did.

    Raises:
      ValueError: the reward was not reached, or the result has no such metric.
    """
    results = _last_results(tune_results)
    if not results:
        raise ValueError("there are no trial results to check")
    result = results[0] or {}
    if evaluation:
        result = result.get("evaluation") or {}
    reward = result.get(REWARD_METRIC)
    if reward is None:
        raise ValueError(f"the last result has no {'evaluation ' if evaluation else ''}"
                         f"{REWARD_METRIC!r}")
    if not reward >= min_reward:  # NaN (no finished episode) fails too
        raise ValueError(f"`stop-reward` of {min_reward} not reached (reached {reward})!")
    print("ok")


FrameworkItem = Union[str, Tuple[str, None]]


def framework_iterator(config: Optional[Dict] = None,
                       frameworks: Union[str, Sequence[str]] = ("tf2", "tf", "tfe", "torch"),
                       session: bool = False,
                       time_iterations: Optional[Dict[str, float]] = None
                       ) -> Iterator[FrameworkItem]:
    """Yields each requested TensorFlow framework name once, setting `config["framework"]` to
    it before the loop body runs, as classic RLlib's test loop does. tfrl runs TensorFlow 2
    only: "tfe" (TensorFlow's eager mode) is "tf2" here and is yielded once with it; other
    frameworks (torch, jax) are skipped with a log line, as classic RLlib skips a framework
    that is not installed. With `session=True` items are (name, None): there is no graph
    session. `time_iterations`, a dict, gets the seconds each body took under its name.

    Raises:
      InvalidConfigError: a framework name classic RLlib does not know.
    """
    config = {} if config is None else config
    names = [frameworks] if isinstance(frameworks, str) else list(frameworks)
    chosen = []
    for name in names:
        if name in TF_FRAMEWORKS:
            name = "tf2" if name == "tfe" else name
            if name not in chosen:
                chosen.append(name)
        elif name in ("torch", "jax"):
            logger.warning("framework_iterator skips framework %r: tfrl runs TensorFlow only",
                           name)
        else:
            raise errors.InvalidConfigError(
                f"framework_iterator: unknown framework {name!r}; use "
                f"{' / '.join(map(repr, TF_FRAMEWORKS + ('torch', 'jax')))}")
    for name in chosen:
        config["framework"] = name
        start = time.time()
        yield (name, None) if session else name
        if time_iterations is not None:
            time_iterations[name] = time_iterations.get(name, 0.0) + time.time() - start
