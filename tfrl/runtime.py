"""Attaching to the distributed engine: start local Ray or join the cluster at `ray_address`."""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def ensure_ray(config: dict) -> None:
    """Initialises Ray once per process: local (laptop mode) unless `config['ray_address']` is set.

    A process that already initialised Ray (a test session, a Tune trial, a user script) keeps its
    connection, which is what lets trainers nest inside other Ray programs.
    """
    import ray

    if ray.is_initialized():
        return
    address = config.get("ray_address")
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        # Ray nices its workers (15) to keep the driver responsive; here the rollout workers pace
        # training (the learner waits for the steps they insert), and on a few cores niced
        # workers lose about a tenth of their throughput to the driver's threads.
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False,
                 _system_config={"worker_niceness": 0})
    logger.info("ray initialised (%s)", address or "local")
