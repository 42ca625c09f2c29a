"""Reverb's `structured_writer` module (`replay.reverb`): `replay.structured_writer` under
Reverb's path, plus `infer_signature`, which builds `tf.TensorSpec`s (TensorFlow is imported
when it is called).
"""
from __future__ import annotations

from typing import Any, Sequence

import tree

from replay.structured_writer import (  # noqa: F401 - Reverb's names in this module
    Condition,
    ConditionProto,
    Config,
    Pattern,
    PatternEngine,
    PatternNode,
    Priority,
    ReferenceStep,
    StructuredWriter,
    StructuredWriterConfig,
    constant_priority_fn,
    create_config,
    create_reference_step,
    pattern_from_transform,
    td_error,
    unpack_pattern,
)


def infer_signature(configs: Sequence[StructuredWriterConfig], step_spec: Any):
    """The table signature (a nest of `tf.TensorSpec`) of the items `configs` make from steps
    like `step_spec` (arrays or specs).

    Raises:
      ValueError: no configs; configs of different pattern structures or tables; configs giving
      one path different dtypes or shapes that cannot be concatenated.
    """
    import tensorflow as tf

    if not configs:
        raise ValueError("At least one config must be provided.")
    if any(c.pattern_structure != configs[0].pattern_structure for c in configs):
        raise ValueError("All configs must have exactly the same pattern_structure.")
    if any(c.table != configs[0].table for c in configs):
        raise ValueError(f"All configs must target the same table but provided configs included "
                         f"{', '.join(sorted(set(c.table for c in configs)))}.")
    flat_step_spec = tree.flatten(step_spec)

    def to_spec(path, *nodes):
        dtypes = [tf.as_dtype(flat_step_spec[node.flat_source_index].dtype) for node in nodes]
        if any(dtype != dtypes[0] for dtype in dtypes):
            raise ValueError(f"Configs produce trajectories with multiple dtypes at {path}. Got {dtypes}.")
        shapes = []
        for node in nodes:
            shape = list(flat_step_spec[node.flat_source_index].shape)
            if node.has_time_dimension:
                shape = [node.num_cells(), *shape]
            shapes.append(tf.TensorShape(shape))
        if (any(shape.rank != shapes[0].rank for shape in shapes)
                or (shapes[0].rank > 1 and any(shape[1:] != shapes[0][1:] for shape in shapes))):
            raise ValueError(f"Configs produce trajectories with incompatible shapes at {path}. Got {shapes}.")
        merged = shapes[0] if all(s == shapes[0] for s in shapes) else [None, *shapes[0][1:]]
        return tf.TensorSpec(shape=merged, dtype=dtypes[0], name="/".join(str(x) for x in path))

    return tree.map_structure_with_path(to_spec, *[unpack_pattern(c) for c in configs])
