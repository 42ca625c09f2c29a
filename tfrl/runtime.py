"""The process's runtime: start local Ray or join the cluster at `ray_address`, check the Ray
resources a component asks for, size TensorFlow's thread pools, and stop at exit what a script
forgot to stop (trainers, and policy optimizers that run a replay service of their own)."""
from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Dict, Optional

from tfrl import errors

logger = logging.getLogger(__name__)

_live_components: "weakref.WeakSet" = weakref.WeakSet()
_exit_hook_registered = False


def _stop_live_components() -> None:
    for component in list(_live_components):
        try:
            component.stop()
        except Exception:  # noqa: BLE001 - the interpreter is exiting; stop the others
            logger.exception("error while stopping %r at exit", component)


def stop_at_exit(component) -> None:
    """Calls `component.stop()` when the interpreter exits, if it was not stopped before (its
    stop must be idempotent). It must run before Python joins the non-daemon threads the
    component's parts started (replay server, learner), which plain `atexit` handlers do not:
    `threading._register_atexit` runs then, and after the replay server's own exit hook was
    registered, so it runs first and a learner stops reading before its server goes away."""
    global _exit_hook_registered
    if not _exit_hook_registered:
        threading._register_atexit(_stop_live_components)  # noqa: SLF001 - see the docstring
        _exit_hook_registered = True
    _live_components.add(component)


def ensure_ray(config: dict) -> None:
    """Initialises Ray once per process: a new local instance unless an address is given.

    The address is `config['ray_address']`, else the `RAY_ADDRESS` environment variable (Ray's
    own convention; "auto" joins the cluster of the last `ray start`). Without either, Ray is
    started locally even when other Ray instances run on the machine: plain `ray.init()` would
    join the last one started with `ray start` (or a leftover of a killed program), which is
    not what a script that did not ask for a cluster expects.

    A process that already initialised Ray (a test session, a Tune trial, a user script) keeps its
    connection, which is what lets trainers nest inside other Ray programs.
    """
    import os

    import ray

    if ray.is_initialized():
        return
    address = config.get("ray_address") or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        # Ray nices its workers (15) to keep the driver responsive; here the rollout workers pace
        # training (the learner waits for the steps they insert), and on a few cores niced
        # workers lose about a tenth of their throughput to the driver's threads.
        ray.init(address="local", include_dashboard=False, log_to_driver=False,
                 configure_logging=False, _system_config={"worker_niceness": 0})
    logger.info("ray initialised (%s)", address or "local")


def configure_tf_threads(num_threads: Optional[int]) -> bool:
    """Limits TensorFlow in this process to `num_threads` intra-op and inter-op threads.

    Rollout actors (config `tf_threads_per_worker`, default 1) do small inference calls; with
    one thread each, N actors on N cores do not oversubscribe the CPU. The driver (config
    `driver_tf_threads`, default None: TensorFlow's choice) runs the learner next to the
    embedded replay server; with small networks on a few cores one thread of each kind avoids
    handing every small op to another thread (DQN's tuned example: about 15% more env steps/s).

    Returns False when TensorFlow already started in this process with other pool sizes (they
    cannot change then), True otherwise. None or 0 leaves TensorFlow's defaults.
    """
    if not num_threads:
        return True
    import tensorflow as tf

    num_threads = int(num_threads)
    try:
        tf.config.threading.set_intra_op_parallelism_threads(num_threads)
        tf.config.threading.set_inter_op_parallelism_threads(num_threads)
    except RuntimeError:  # the TF context already exists in this process; its pools stay
        return (tf.config.threading.get_intra_op_parallelism_threads() == num_threads
                and tf.config.threading.get_inter_op_parallelism_threads() == num_threads)
    return True


def check_resources(key: str, resources: Any) -> Dict[str, float]:
    """`resources` as {name: amount}.

    Raises:
      InvalidConfigError: not a dict of non-empty names to non-negative numbers.
    """
    if not isinstance(resources, dict):
        raise errors.InvalidConfigError(
            f"{key} must be a dict of Ray resource name -> amount (e.g. {{'replay': 1}}), got "
            f"{resources!r}")
    checked = {}
    for name, amount in resources.items():
        if not isinstance(name, str) or not name:
            raise errors.InvalidConfigError(f"{key}: resource names must be non-empty strings, got {name!r}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise errors.InvalidConfigError(
                f"{key}: the amount of {name!r} must be a number >= 0, got {amount!r}")
        checked[name] = float(amount)
    return checked


def check_feasible(key: str, resources: Optional[Dict[str, float]]) -> None:
    """Raises InvalidConfigError when no live node of the cluster
    offers `resources` in total (Ray would keep an actor asking for them pending forever)."""
    if not resources:
        return
    import ray

    offered = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    if any(all(node.get(name, 0.0) >= amount for name, amount in resources.items())
           for node in offered):
        return
    names = sorted({name for node in offered for name in node
                    if not name.startswith("node:") and name not in ("memory", "object_store_memory")})
    raise errors.InvalidConfigError(
        f"{key}={resources}: no node of the Ray cluster offers these resources (the nodes offer "
        f"{names}); start a node with them (`ray start --resources='{{\"replay\": 1}}'`) or "
        f"change {key}")
