"""Classic `ray.rllib.examples`: the helper modules of classic RLlib's example scripts that are
library code there (scripts import them from the installed package), over tfrl's own objects
with gymnasium's API. Only the helpers listed in the subpackages are here."""
