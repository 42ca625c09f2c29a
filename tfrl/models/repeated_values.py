"""`RepeatedValues`: how a model reads a batch of `Repeated` observations (classic RLlib's
`models.repeated_values`), built by `preprocessors.classic_unflattened_obs` from the flat rows
of classic custom models. Sits under tfrl/models beside the preprocessors."""
from __future__ import annotations

from typing import Any, List

import tree


class RepeatedValues:
    """A batch of lists of up to `max_len` values: `values`, the children padded to `max_len`
    (a nest of tensors of shape [B, max_len, ...], as the child space's structure), and
    `lengths` [B], how many of each row's are real."""

    def __init__(self, values: Any, lengths: Any, max_len: int):
        self.values = values
        self.lengths = lengths
        self.max_len = max_len

    def unbatch_repeat_dim(self) -> List[Any]:
        """The values split along the repeat dimension: `max_len` nests of [B, ...] (padding
        included)."""
        return [_take(self.values, (slice(None), i)) for i in range(self.max_len)]

    def unbatch_all(self) -> List[List[Any]]:
        """Per batch row, the list of its real values (lengths read as numbers, so eagerly).

        Raises:
          ValueError: the lengths are symbolic (inside a traced function).
        """
        try:
            lengths = [int(n) for n in self.lengths]
        except TypeError as e:
            raise ValueError("unbatch_all() needs the lengths as numbers: call it eagerly, not "
                             "inside a traced function") from e
        return [[_take(self.values, (b, j)) for j in range(n)] for b, n in enumerate(lengths)]

    def __repr__(self) -> str:
        return f"RepeatedValues(value={self.values!r}, lengths={self.lengths!r}, max_len={self.max_len})"


def _take(values: Any, index: tuple) -> Any:
    """`values[index]` leaf by leaf; a RepeatedValues inside (a Repeated child of the child
    space) keeps its repeat dimension, its lengths indexed alike."""
    def take(value):
        if isinstance(value, RepeatedValues):
            return RepeatedValues(_take(value.values, index), value.lengths[index], value.max_len)
        return value[index]

    return tree.map_structure(take, values)
