"""Reverb's `pattern_dataset` module (`replay.reverb`): structured-writer patterns over a tf.data stream.

`PatternDataset` turns a dataset of steps into the dataset of trajectories a `StructuredWriter`
with the same configs would have inserted, with no server involved (for example to build
training data offline from logged episodes). It shares `structured_writer.PatternEngine` with
the writer, so both apply patterns and conditions by the same rules. It runs eagerly: the input
dataset is iterated in Python (`tf.data.Dataset.from_generator`), as Reverb's version also
requires eager mode.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
import tree

from replay.reverb import replay_sample
from replay.reverb import structured_writer


class PatternDataset:
    """A `tf.data.Dataset` of the trajectories `configs` make from the steps of `input_dataset`.

    `PatternDataset(...)` returns the dataset itself (its `element_spec` is
    `structured_writer.infer_signature(configs, input_dataset.element_spec)`).

    Args:
      input_dataset: a dataset of single steps (flatten episodes first).
      configs: the `StructuredWriterConfig`s to apply.
      respect_episode_boundaries: if True, no trajectory spans two episodes.
      is_end_of_episode: step -> scalar bool, True on the last step of an episode.

    Raises:
      ValueError: configs that `infer_signature` rejects, or an `is_end_of_episode` that does
      not return a scalar bool.
    """

    def __new__(cls, input_dataset: tf.data.Dataset,
                configs: Sequence[structured_writer.StructuredWriterConfig],
                respect_episode_boundaries: bool, is_end_of_episode: Callable[[Any], Any]) -> tf.data.Dataset:
        signature = structured_writer.infer_signature(configs, input_dataset.element_spec)
        output_signature = tree.map_structure(lambda s: tf.TensorSpec(s.shape, s.dtype), signature)
        returned = tf.function(is_end_of_episode).get_concrete_function(input_dataset.element_spec) \
            .structured_outputs
        if not (isinstance(returned, tf.Tensor) and returned.dtype == tf.bool
                and returned.shape.is_compatible_with([])):
            raise ValueError(f"Invalid `is_end_of_episode`. `is_end_of_episode` must return `bool`, "
                             f"but its return type is {returned}.")
        configs = list(configs)
        structure = structured_writer.unpack_pattern(configs[0])

        def generate():
            engine = structured_writer.PatternEngine(configs)
            for step in input_dataset:
                values = [np.asarray(leaf) for leaf in tree.flatten(step)]
                applied = engine.append(values, values)
                last = bool(is_end_of_episode(step))
                if last:
                    applied += engine.end_episode(values)
                for _, selections in applied:
                    flat = [np.stack(p) if isinstance(p, list) else p for p in selections]
                    yield tree.unflatten_as(structure, flat)
                if last and respect_episode_boundaries:
                    engine.clear()

        return tf.data.Dataset.from_generator(generate, output_signature=output_signature)


def pattern_dataset_with_info(input_dataset: tf.data.Dataset,
                              configs: Sequence[structured_writer.StructuredWriterConfig],
                              respect_episode_boundaries: bool,
                              is_end_of_episode: Callable[[Any], Any]) -> tf.data.Dataset:
    """`PatternDataset` with each trajectory wrapped in a `ReplaySample` whose info is zeros.

    Raises: as `PatternDataset`.
    """
    dataset = PatternDataset(input_dataset, configs, respect_episode_boundaries, is_end_of_episode)
    return dataset.map(lambda data: replay_sample.ReplaySample(info=replay_sample.SampleInfo.zeros(), data=data))
