"""Gymnasium spaces beyond gymnasium's own (classic RLlib's `utils.spaces`): `Repeated`
(variable-length lists), `Simplex` (points on a probability simplex), `FlexDict` (a Dict space
filled in after construction), and helpers that walk nested Tuple/Dict spaces and values
(structure.py). `tfrl.rllib.utils.spaces` exports them under the classic module paths."""
from tfrl.utils.lazy_exports import lazy_package

__all__, __getattr__ = lazy_package(__name__, {
    "repeated": ("Repeated",), "simplex": ("Simplex",), "flex_dict": ("FlexDict",),
    "structure": ("flatten_space", "get_base_struct_from_space", "flatten_to_single_ndarray",
                  "unbatch")})
