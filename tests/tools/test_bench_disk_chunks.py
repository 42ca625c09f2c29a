"""tools/bench_disk_chunks.py on a tiny table: one result line per store with the same items,
and the disk store's chunk bytes outside the server's anonymous memory."""
import os
import re
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tools import bench_disk_chunks  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def test_each_store_reports_its_rates_and_peak_memory(tmp_path, capsys):
    bench_disk_chunks.main(["--table-mb", "80", "--item-bytes", "100000", "--sample-seconds", "0.5",
                            "--chunk-dir", str(tmp_path)])
    lines = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("store="):
            fields = dict(re.findall(r"(\w+)=([\d.]+|\w+)", line))
            lines[fields["store"]] = fields
    assert set(lines) == {"memory", "disk", "bounded"}
    for fields in lines.values():
        assert int(fields["items"]) == 800
        assert float(fields["inserts_per_s"]) > 0 and float(fields["samples_per_s"]) > 0
    # 80 MB of chunks: on the heap of the in-memory server, not of the disk-backed one (whose
    # heap grows by the items' metadata and message buffers, which do not grow with the table)
    growth = {store: float(f["rss_anon_mb_after_insert"]) - float(f["rss_anon_mb_idle"])
              for store, f in lines.items()}
    assert growth["memory"] > 72 and growth["disk"] < 40 and growth["bounded"] < 40, growth
    assert os.listdir(tmp_path) == []  # its temporary directory is gone
