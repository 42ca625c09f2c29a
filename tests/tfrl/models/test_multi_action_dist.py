"""MultiActionDistribution (nested Tuple/Dict action spaces) against the per-leaf
distributions it combines, and the catalog's choice for nested spaces."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.errors import UnsupportedSpaceError
from tfrl.models import Categorical, DiagGaussian, ModelCatalog, MultiCategorical
from tfrl.models.multi_action_dist import MultiActionDistribution
from tfrl.rllib.models.catalog import ModelCatalog as ClassicModelCatalog
from tfrl.rllib.models.tf.tf_action_dist import MultiActionDistribution as ClassicMulti

Box, Dict, Discrete, Tuple = gym.spaces.Box, gym.spaces.Dict, gym.spaces.Discrete, gym.spaces.Tuple

# the space of classic RLlib's nested_action_spaces example: a scalar Box inside a Tuple inside
# a Dict, a 1-D Box and a Discrete
SPACE = Dict({"a": Tuple([Dict({"d": Box(-10.0, 10.0, ()), "e": Discrete(2)})]),
              "b": Box(-10.0, 10.0, (2,)), "c": Discrete(4)})
B = 6


def _dist(space=SPACE, seed=0):
    dist_class, n = ModelCatalog.get_action_dist(space, {})
    inputs = np.random.default_rng(seed).normal(size=(B, n)).astype(np.float32)
    return dist_class(tf.constant(inputs)), inputs


def _leaves(inputs):
    """The leaf distributions of SPACE, built by hand from the same inputs: leaves in
    tree.flatten order a/0/d (Gaussian over 1 value: 2 inputs), a/0/e (2 logits), b (4), c (4)."""
    d, e, b, c = np.split(inputs, [2, 4, 8], axis=-1)
    return (DiagGaussian(tf.constant(d)), Categorical(tf.constant(e)),
            DiagGaussian(tf.constant(b)), Categorical(tf.constant(c)))


def test_catalog_sizes_the_model_output_from_the_leaves():
    dist_class, n = ModelCatalog.get_action_dist(SPACE, {})
    assert n == 2 + 2 + 4 + 4
    assert dist_class.func is MultiActionDistribution
    assert [type(c) for c in dist_class(tf.zeros([1, n])).flat_child_distributions] == [
        DiagGaussian, Categorical, DiagGaussian, Categorical]
    # the classic import paths give the same
    classic_class, classic_n = ClassicModelCatalog.get_action_dist(SPACE, {})
    assert classic_n == n and classic_class.func is ClassicMulti


def test_samples_have_the_space_structure_shapes_and_dtypes():
    dist, _ = _dist()
    for actions in (dist.sample(seed=tf.constant([1, 2])), dist.deterministic_sample(),
                    dist.sample()):
        assert set(actions) == {"a", "b", "c"} and isinstance(actions["a"], tuple)
        assert actions["a"][0]["d"].shape == (B,) and actions["a"][0]["d"].dtype == tf.float32
        assert actions["a"][0]["e"].shape == (B,) and actions["a"][0]["e"].dtype == tf.int64
        assert actions["b"].shape == (B, 2) and actions["c"].shape == (B,)
        row = tf.nest.map_structure(lambda a: a.numpy()[0], actions)
        clipped = {"a": ({"d": np.asarray(np.clip(row["a"][0]["d"], -10, 10), np.float32),
                          "e": row["a"][0]["e"]},),
                   "b": np.clip(row["b"], -10, 10), "c": row["c"]}
        assert SPACE.contains(clipped)


def test_logp_entropy_and_kl_are_sums_over_the_leaves():
    dist, inputs = _dist(seed=1)
    other, other_inputs = _dist(seed=2)
    d, e, b, c = _leaves(inputs)
    od, oe, ob, oc = _leaves(other_inputs)
    actions = dist.sample(seed=tf.constant([3, 4]))
    expected_logp = (d.logp(actions["a"][0]["d"][:, None]) + e.logp(actions["a"][0]["e"])
                     + b.logp(actions["b"]) + c.logp(actions["c"]))
    np.testing.assert_allclose(dist.logp(actions).numpy(), expected_logp.numpy(), rtol=1e-5)
    np.testing.assert_allclose(dist.sampled_action_logp().numpy(), expected_logp.numpy(),
                               rtol=1e-5)
    np.testing.assert_allclose(
        dist.entropy().numpy(),
        (d.entropy() + e.entropy() + b.entropy() + c.entropy()).numpy(), rtol=1e-5)
    np.testing.assert_allclose(
        dist.kl(other).numpy(), (d.kl(od) + e.kl(oe) + b.kl(ob) + c.kl(oc)).numpy(),
        rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(dist.kl(dist).numpy(), 0.0, atol=1e-6)


def test_logp_takes_the_nest_its_flat_leaves_or_classic_single_flat_rows():
    dist, _ = _dist(seed=3)
    actions = tf.nest.map_structure(lambda a: a.numpy(), dist.sample(seed=tf.constant([5, 6])))
    expected = dist.logp(actions).numpy()
    leaves = tf.nest.flatten(actions)
    np.testing.assert_allclose(dist.logp(leaves).numpy(), expected, rtol=1e-6)
    flat_rows = np.concatenate([np.reshape(a, [B, -1]).astype(np.float32) for a in leaves], -1)
    assert flat_rows.shape == (B, 1 + 1 + 2 + 1)
    np.testing.assert_allclose(dist.logp(flat_rows).numpy(), expected, rtol=1e-5)
    with pytest.raises(UnsupportedSpaceError, match="leaves"):
        dist.logp(leaves[:2])


def test_seeded_samples_repeat_and_the_leaves_draw_independently():
    dist, _ = _dist(seed=4)
    first = dist.sample(seed=tf.constant([7, 8]))
    again = dist.sample(seed=tf.constant([7, 8]))
    tf.nest.map_structure(lambda x, y: np.testing.assert_array_equal(x.numpy(), y.numpy()),
                          first, again)
    # two leaves of the same family and inputs still get different noise
    twin = Tuple([Box(-1.0, 1.0, (3,)), Box(-1.0, 1.0, (3,))])
    dist_class, n = ModelCatalog.get_action_dist(twin, {})
    x, y = dist_class(tf.zeros([4, n])).sample(seed=tf.constant([1, 1]))
    assert not np.allclose(x.numpy(), y.numpy())


def test_tuple_with_multidiscrete_and_a_matrix_box_leaf():
    space = Tuple([gym.spaces.MultiDiscrete([2, 3]), Box(-1.0, 1.0, (2, 2))])
    dist_class, n = ModelCatalog.get_action_dist(space, {})
    assert n == 5 + 8
    inputs = np.random.default_rng(5).normal(size=(B, n)).astype(np.float32)
    dist = dist_class(tf.constant(inputs))
    md, box = dist.sample(seed=tf.constant([1, 3]))
    assert md.shape == (B, 2) and box.shape == (B, 2, 2)
    expected = (MultiCategorical(tf.constant(inputs[:, :5]), input_lens=[2, 3]).logp(md)
                + DiagGaussian(tf.constant(inputs[:, 5:])).logp(tf.reshape(box, [B, 4])))
    np.testing.assert_allclose(dist.logp((md, box)).numpy(), expected.numpy(), rtol=1e-5)


def test_a_leaf_without_a_distribution_is_refused_by_name():
    with pytest.raises(UnsupportedSpaceError, match="MultiBinary"):
        ModelCatalog.get_action_dist(Tuple([Discrete(2), gym.spaces.MultiBinary(3)]), {})
