"""Recording a worker's experience: the output writer its `output` settings ask for, and
`record_episodes`, which plays whole episodes into it (`tfrl rollout --out`, the offline
benchmarks). The writers themselves are output_writer.py's `OutputWriter` and its TFRecord
(tfrecord_writer.py) and JSON-lines (json_writer.py) forms.
"""
from __future__ import annotations

from typing import Callable, List, Optional

from tfrl.offline.json_writer import JsonWriter
from tfrl.offline.output_writer import OutputWriter
from tfrl.offline.tfrecord_writer import TFRecordWriter


def make_output_writer(settings, worker_index: int) -> Optional[OutputWriter]:
    """The writer `settings` (OfflineSettings) ask for, or None without `output`.

    Raises:
      InvalidConfigError: the output directory cannot be created.
    """
    if not settings.output:
        return None
    if settings.output_format == "json":
        return JsonWriter(settings.output, worker_index, settings.output_max_file_size)
    return TFRecordWriter(settings.output, worker_index, settings.output_max_file_size,
                          settings.output_compress_columns)


def record_episodes(worker, episodes: int,
                    on_episode: Optional[Callable[[int, float], None]] = None) -> List[float]:
    """Plays `episodes` whole episodes in `worker` (a RolloutWorker with `output` set, built
    with batch_mode "complete_episodes" and rollout_fragment_length 1, so that each `sample()`
    is one episode), which records every step; closes its output files and returns the
    episodes' returns. What `tfrl rollout --out` and the offline benchmarks run.
    `on_episode(index, episode_return)` is called as each episode ends.
    """
    worker.set_replay_output(None)  # the batches go to the files only
    returns: List[float] = []
    while len(returns) < episodes:
        worker.sample()
        for episode in worker.get_metrics():
            if on_episode is not None:
                on_episode(len(returns), episode.episode_reward)
            returns.append(episode.episode_reward)
    worker.output_writer.close()
    return returns
