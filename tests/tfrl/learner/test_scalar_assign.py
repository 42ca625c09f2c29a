"""Scalars set between training steps (schedules, adaptive coefficients) reach every replica.

`assign_scalar` writes a strategy's mirrored variable copy by copy, past the strategy's update
path; these check that every replica's step then reads the new value, and that a variable
aggregated on read still goes through the strategy. The CPU is split into two logical devices
(tests/conftest.py), so the strategy's two replicas are real.
"""
import numpy as np
import tensorflow as tf

from tfrl.learner import mirrored_strategy
from tfrl.utils.tf_ops import assign_scalar


def test_every_replica_reads_a_scalar_assigned_between_steps():
    strategy = mirrored_strategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        coefficient = tf.Variable(0.5, trainable=False, dtype=tf.float32)

    @tf.function
    def step(x):  # traced once, before the assignments: it must read the variable, not a copy
        return strategy.run(lambda: coefficient * x)

    def per_replica(result):
        return [float(v) for v in strategy.experimental_local_results(result)]

    assert per_replica(step(tf.constant(2.0))) == [1.0, 1.0]
    for value in (0.25, 0.0, 3.0):
        assign_scalar(coefficient, value)
        assert per_replica(step(tf.constant(2.0))) == [2 * value, 2 * value]
        assert [float(v) for v in coefficient.values] == [value, value]
        assert float(coefficient.read_value()) == value
    assert step.experimental_get_tracing_count() == 1


def test_plain_and_read_aggregated_variables_take_the_ordinary_assign():
    plain = tf.Variable(1.0)
    assign_scalar(plain, 4.0)
    assert float(plain.numpy()) == 4.0
    strategy = mirrored_strategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        summed = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                             aggregation=tf.VariableAggregation.SUM)
    assign_scalar(summed, 6.0)  # in cross-replica context: the strategy splits it over replicas
    np.testing.assert_allclose(float(summed.read_value()), 6.0)
