"""tfrl.spaces (classic `ray.rllib.utils.spaces`) on real gymnasium spaces: Repeated, Simplex,
FlexDict and the nested-space helpers, also under their classic module paths."""
import gymnasium as gym
import numpy as np
import pytest
import tree

from tfrl import errors
from tfrl.rllib.utils.spaces.flexdict import FlexDict
from tfrl.rllib.utils.spaces.repeated import Repeated
from tfrl.rllib.utils.spaces.simplex import Simplex
from tfrl.rllib.utils.spaces.space_utils import (flatten_space, flatten_to_single_ndarray,
                                                 get_base_struct_from_space, unbatch)

Box, Dict, Discrete, Tuple = gym.spaces.Box, gym.spaces.Dict, gym.spaces.Discrete, gym.spaces.Tuple


def player_space():
    """SimpleRPG's (classic complex_struct_space.py) nesting: Repeated inside Dict inside
    Repeated."""
    return Repeated(Dict({"location": Box(-100, 100, (2,)),
                          "items": Repeated(Discrete(5), max_len=7)}), max_len=4)


def test_repeated_samples_lists_of_one_to_max_len_children():
    space = player_space()
    space.seed(3)
    lengths = set()
    for _ in range(200):
        players = space.sample()
        assert isinstance(players, list) and 1 <= len(players) <= 4
        assert space.contains(players)
        lengths.add(len(players))
    assert lengths == {1, 2, 3, 4}
    assert space.contains([])  # an empty list is a member, though sample() never draws one


def test_repeated_membership_and_equality():
    space = Repeated(Discrete(3), max_len=2)
    assert space.contains([0, 2]) and space.contains((1,))
    assert not space.contains([0, 1, 2])  # too long
    assert not space.contains([3])  # a child outside Discrete(3)
    assert not space.contains(np.array([0, 1]))  # not a list
    assert space == Repeated(Discrete(3), max_len=2)
    assert space != Repeated(Discrete(3), max_len=3) and space != Repeated(Discrete(4), 2)


def test_repeated_seeding_repeats_samples_children_included():
    first, second = player_space(), player_space()
    first.seed(7)
    second.seed(7)
    a = [first.sample() for _ in range(5)]
    b = [second.sample() for _ in range(5)]
    assert tree.map_structure(lambda x, y: np.array_equal(x, y), a, b) == \
        tree.map_structure(lambda x: True, a)


@pytest.mark.parametrize("child, max_len", [((2,), 3), (Discrete(2), 0), (Discrete(2), 1.5)])
def test_repeated_refuses_a_bad_child_or_length(child, max_len):
    with pytest.raises(errors.UnsupportedSpaceError):
        Repeated(child, max_len)


def test_simplex_samples_points_of_the_simplex():
    space = Simplex((3, 4))
    space.seed(0)
    for _ in range(50):
        x = space.sample()
        assert x.shape == (3, 4) and x.dtype == np.float32
        np.testing.assert_allclose(x.sum(axis=-1), np.ones(3), rtol=0, atol=1e-5)
        assert space.contains(x)
    assert not space.contains(np.full((3, 4), 0.3, np.float32))  # sums to 1.2
    assert not space.contains(np.array([[1.5, -0.5, 0.0, 0.0]] * 3))  # outside [0, 1]
    assert not space.contains(np.full((4,), 0.25))  # wrong shape


def test_simplex_concentration_shapes_the_draws():
    peaked = Simplex((3,), concentration=[50.0, 1.0, 1.0])
    peaked.seed(1)
    mean = np.mean([peaked.sample() for _ in range(400)], axis=0)
    # Dirichlet mean = concentration / sum: 50/52 on the first coordinate
    assert mean[0] > 0.9 and mean[1] < 0.05
    assert peaked == Simplex((3,), concentration=[50.0, 1.0, 1.0]) and peaked != Simplex((3,))
    with pytest.raises(errors.UnsupportedSpaceError, match="3 positive numbers"):
        Simplex((3,), concentration=[1.0, 1.0])
    with pytest.raises(errors.UnsupportedSpaceError, match="shape"):
        Simplex(3)


def test_flexdict_is_filled_in_after_construction_and_keeps_its_order():
    space = FlexDict({})
    space["z"] = Discrete(2)
    space["a"] = Box(0.0, 1.0, (2,))
    assert list(space.spaces) == ["z", "a"]
    assert isinstance(space, Dict) and space["a"] == Box(0.0, 1.0, (2,))
    sample = space.sample()
    assert set(sample) == {"z", "a"} and space.contains(sample)
    with pytest.raises(errors.UnsupportedSpaceError, match="'b'"):
        space["b"] = (2,)
    with pytest.raises(errors.UnsupportedSpaceError, match="not both"):
        FlexDict({"a": Discrete(2)}, b=Discrete(2))


NESTED = Dict({"a": Tuple([Dict({"d": Box(-10.0, 10.0, ()), "e": Discrete(2)})]),
               "b": Box(-10.0, 10.0, (2,)), "c": Discrete(4)})


def test_flatten_space_lists_leaves_in_the_order_of_a_flattened_value():
    """nested_action_spaces.py's env zips tree.flatten(action) with flatten_space(space)."""
    leaves = flatten_space(NESTED)
    assert leaves == [Box(-10.0, 10.0, ()), Discrete(2), Box(-10.0, 10.0, (2,)), Discrete(4)]
    NESTED.seed(0)
    for _ in range(20):
        values = tree.flatten(NESTED.sample())
        assert all(space.contains(np.asarray(v, space.dtype)) for v, space in zip(values, leaves))
    # a FlexDict filled out of order still lists its leaves as tree.flatten orders the keys
    flex = FlexDict({})
    flex["z"], flex["a"] = Discrete(3), Box(0.0, 1.0, (1,))
    assert flatten_space(flex) == [Box(0.0, 1.0, (1,)), Discrete(3)]
    assert flatten_space(Discrete(2)) == [Discrete(2)]
    with pytest.raises(errors.UnsupportedSpaceError):
        flatten_space({"a": Discrete(2)})


def test_base_struct_of_a_space():
    struct = get_base_struct_from_space(NESTED)
    assert struct == {"a": ({"d": Box(-10.0, 10.0, ()), "e": Discrete(2)},),
                      "b": Box(-10.0, 10.0, (2,)), "c": Discrete(4)}
    assert get_base_struct_from_space(Discrete(2)) == Discrete(2)


def test_flatten_to_single_ndarray():
    out = flatten_to_single_ndarray([np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([7, 8])])
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0, 4.0, 7.0, 8.0])
    out = flatten_to_single_ndarray({"b": np.array([3.0]), "a": (np.array(1.0), np.array([2.0]))})
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])  # keys in sorted order, as tree's
    single = np.array([[5.0]])
    assert flatten_to_single_ndarray(single) is single
    with pytest.raises(ValueError, match="no values"):
        flatten_to_single_ndarray([])


def test_unbatch_turns_a_nest_of_batches_into_rows():
    rows = unbatch({"a": np.array([1, 2, 3]),
                    "b": (np.array([4, 5, 6]), np.array([7.0, 8.0, 9.0]))})
    assert rows == [{"a": 1, "b": (4, 7.0)}, {"a": 2, "b": (5, 8.0)}, {"a": 3, "b": (6, 9.0)}]
    assert unbatch(np.array([1, 2])) == [1, 2]
    with pytest.raises(ValueError, match="differ in length"):
        unbatch({"a": np.zeros(2), "b": np.zeros(3)})
    with pytest.raises(ValueError, match="scalar"):
        unbatch({"a": np.zeros(2), "b": 1.0})
