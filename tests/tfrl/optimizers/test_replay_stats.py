"""What replay-fed optimizers report about their tables: the chunk counters of a real replay
server's StatisticsExtension, asked again only when the report's interval has passed."""
import numpy as np

import replay
from tfrl.optimizers.replay_stats import CompressionReport, table_compression


def _write_steps(client, count):
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for _ in range(count):
            writer.append(np.zeros(64, np.float32))  # zeros: lz4 stores far fewer bytes
            writer.create_item("t", 1.0, writer.history[-1])


def test_the_report_is_asked_again_only_after_its_interval():
    table = replay.Table("t", replay.Uniform(), replay.Fifo(), 1000, replay.MinSize(1),
                         extensions=[replay.StatisticsExtension()])
    server = replay.Server([table])
    try:
        client = server.localhost_client()
        slow = CompressionReport("t", interval_s=3600.0)
        # an empty table's answer is not kept: the next call asks again
        assert slow([client])["chunks_inserted"] == 0
        _write_steps(client, 3)
        first = slow([client])
        assert first["chunks_inserted"] == 3 and first["compression_ratio"] > 2
        _write_steps(client, 2)
        # within the interval the last answer is reported again, without asking
        assert slow([client]) == first
        assert table_compression([client], "t")["chunks_inserted"] == 5
        # an interval that has passed asks the server
        assert CompressionReport("t", interval_s=0.0)([client])["chunks_inserted"] == 5
        # no StatisticsExtension on the table: nothing to report
        assert CompressionReport("missing")([client]) is None
    finally:
        server.stop()
