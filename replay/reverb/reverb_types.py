"""Reverb's `reverb_types` module: `TableInfo` (`replay.TableInfo`, see `replay.table_info`)."""
from replay.table_info import SelectorOptions, TableInfo

__all__ = ["SelectorOptions", "TableInfo"]
