"""What an item must be to enter a table: a valid `Item`, columns that fit the signature the
way the table's items already do, and a priority both selectors accept.

Part of `replay.table.Table` (a mixin; `Table` is the only class built on it). Validation runs
before an insert waits or changes anything, mostly without the table's lock: it reads the item
and the table's immutable configuration, and takes the lock only to settle the column modes
(how the present items' columns fit the signature). Checked layouts are cached per table.
"""
from __future__ import annotations

import weakref
from typing import List, Optional, Sequence, Tuple

import tree

from replay import errors, specs
from replay.items import Item
from replay.selectors import ItemSelector

# Distinct item column layouts a table remembers as checked against its signature.
_MAX_FITTING_LAYOUTS = 64
# chunks whose step items were found to fit the signature (weakly held: they go with their chunk)
_MAX_FITTING_SPANS = 4096


class ItemValidation:
    """The checks a `replay.table.Table` makes of items and priorities.

    Uses the table's `name`, `signature`, `_lock`, `_items`, `_sampler` and `_remover`;
    `_init_validation` sets up the rest.
    """

    def _init_validation(self, sampler: ItemSelector, remover: ItemSelector) -> None:
        # Per signature column, how the present items' columns fit it (`specs.FITS_WHOLE`,
        # `FITS_STEP` or both while no item decided): all one way, so that a signed table never
        # holds one column in two shapes (a step-sized column `x[-1:]` beside whole ones).
        self._column_modes: Optional[Tuple[int, ...]] = None
        # Column layouts (shape, dtype per column) already checked against the signature and
        # the column modes: a table's items almost always share one, and checking walks the
        # signature nest. Replaced (not changed) whenever the modes are reset.
        self._fitting_layouts: set = set()
        self._fitting_spans: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        # Selectors that accept every priority `Item.validate` accepts (no check of their own)
        # let `validate_items` skip their per-item checks.
        self._selectors_check_priorities = any(
            type(s).validate_priority is not ItemSelector.validate_priority for s in (sampler, remover))

    def _forget_column_modes_locked(self) -> None:
        """The next item settles the column modes afresh (an emptied or reloaded table)."""
        self._column_modes = None
        self._fitting_layouts, self._fitting_spans = set(), weakref.WeakKeyDictionary()

    def validate_items(self, items: Sequence[Item]) -> List[Item]:
        """Checks items for `try_insert_many` (as `insert_many` does before inserting anything) and
        stores their normalized priorities; returns them as a list.

        Raises:
          The validation errors of `insert_or_assign` (InvalidArgumentError,
          SignatureMismatchError, NotFoundError).
        """
        items = list(items)
        if self.signature is None and not self._selectors_check_priorities and all(
                type(item) is Item and type(item.priority) is float for item in items):
            # what a writer sends to a table without a signature: `Item.validate` checks all
            for item in items:
                item.validate()
            return items
        priorities = [self._validate_item(item) for item in items]
        for item, priority in zip(items, priorities):
            item.priority = priority
        return items

    def _validate_item(self, item: Item) -> float:
        if not isinstance(item, Item):
            raise errors.InvalidArgumentError(f"table {self.name!r}: expected a replay.items.Item, got {item!r}")
        item.validate()
        if self.signature is not None:
            span = item.span
            fitting_spans = self._fitting_spans
            if span is not None:
                # the items of one chunk with the same length and squeeze flags share a layout
                chunk = item.span_chunk
                fitting = fitting_spans.get(chunk)
                if fitting is not None and (span[2], span[3]) in fitting:
                    return self._validate_priority(item.key, item.priority)
            layout = tuple(item.column_specs())
            fitting_layouts = self._fitting_layouts
            if layout not in fitting_layouts:
                fits = specs.column_fits(self.signature, list(layout), self.name)
                fitting_layouts, fitting_spans = self._settle_column_modes(layout, fits)
                if len(fitting_layouts) < _MAX_FITTING_LAYOUTS:
                    fitting_layouts.add(layout)
            if span is not None:
                if chunk not in fitting_spans and len(fitting_spans) >= _MAX_FITTING_SPANS:
                    fitting_spans.clear()  # items of a chunk mostly arrive together
                fitting_spans.setdefault(chunk, set()).add((span[2], span[3]))
        return self._validate_priority(item.key, item.priority)

    def _settle_column_modes(self, layout: tuple, fits: Tuple[int, ...]):
        """Narrows the column modes to an item's `fits` (an empty table starts afresh); returns
        the layout caches that hold for the modes now.

        Raises:
          SignatureMismatchError: a column fits the signature only the other way than the
            present items' do.
        """
        with self._lock:
            if not self._items and self._column_modes is not None:
                self._forget_column_modes_locked()
            modes = self._column_modes or (specs.FITS_WHOLE | specs.FITS_STEP,) * len(fits)
            settled = tuple(mode & fit for mode, fit in zip(modes, fits))
            for index, mode in enumerate(settled):
                if not mode:
                    path = tree.flatten_with_path(self.signature)[index][0]
                    spec = tree.flatten(self.signature)[index]
                    shape = layout[index][0]
                    held = "whole columns" if modes[index] == specs.FITS_WHOLE else "one step per time step"
                    raise errors.SignatureMismatchError(
                        f"table {self.name!r}: column {path or '(root)'} has shape {shape}, which fits the "
                        f"signature's shape {spec.shape} only "
                        f"{'as one step' if fits[index] == specs.FITS_STEP else 'as the whole column'}, "
                        f"but the table's items hold that column with the signature describing "
                        f"{held}; a signed table holds each column in one shape family (build the "
                        f"item as the signature describes it, e.g. history[...][-1] rather than [-1:] "
                        f"for a shape [] column)")
            if settled != self._column_modes:
                self._column_modes = settled
            return self._fitting_layouts, self._fitting_spans

    def _validate_priority(self, key: int, priority) -> float:
        value = self._sampler.validate_priority(key, priority)
        self._remover.validate_priority(key, value)
        return value
