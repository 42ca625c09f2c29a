"""A TF-Agents/Acme-style loop written against replay.reverb: a trajectory writer fills a
prioritized table, a TrajectoryDataset feeds a learner, and the learner updates priorities."""
import numpy as np
import tensorflow as tf

import replay.reverb as reverb


def test_writer_dataset_learner_updates_priorities():
    table = reverb.Table(
        name="replay", sampler=reverb.selectors.Prioritized(0.8), remover=reverb.selectors.Fifo(),
        max_size=100, rate_limiter=reverb.rate_limiters.MinSize(4),
        signature={"obs": tf.TensorSpec([2, 3], tf.float32), "reward": tf.TensorSpec([2], tf.float32)})
    server = reverb.Server(tables=[table])
    try:
        client = server.localhost_client()
        with client.trajectory_writer(num_keep_alive_refs=2) as writer:
            for t in range(9):
                writer.append({"obs": np.full(3, t, np.float32), "reward": np.float32(t)})
                if t >= 1:
                    writer.create_item("replay", 1.0, {"obs": writer.history["obs"][-2:],
                                                      "reward": writer.history["reward"][-2:]})
        dataset = reverb.TrajectoryDataset.from_table_signature(
            server.address, "replay", max_in_flight_samples_per_worker=8)
        batches = dataset.batch(4, drop_remainder=True).take(3)
        weights = tf.Variable(tf.zeros([3]))
        optimizer = tf.keras.optimizers.SGD(0.01)
        tf_client = reverb.TFClient(server.address)

        @tf.function
        def learner_step(sample):
            with tf.GradientTape() as tape:
                prediction = tf.reduce_sum(sample.data["obs"][:, 0] * weights, axis=-1)
                td_error = prediction - sample.data["reward"][:, 0]
                loss = tf.reduce_mean(td_error ** 2)
            optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
            new_priorities = tf.cast(tf.abs(td_error), tf.float64) + 1e-3
            with tf.control_dependencies([tf_client.update_priorities("replay", sample.info.key, new_priorities)]):
                return tf.identity(sample.info.key), new_priorities

        updated = {}
        for sample in batches:
            keys, priorities = learner_step(sample)
            updated.update(zip(keys.numpy().tolist(), priorities.numpy().tolist()))
        dataset.close()
        assert float(tf.reduce_sum(tf.abs(weights))) > 0
        for key, priority in updated.items():
            item = table.get(key)
            assert item.priority != 1.0 or priority == 1.0
        assert any(table.get(k).priority != 1.0 for k in updated)
        assert table.info.num_unique_samples >= 1
    finally:
        server.stop()
