"""tools/bench_disk_checkpoint.py on a small table: one result line per format, the referencing
save writing none of the chunk bytes that the copying one writes."""
import os
import re
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tools import bench_disk_checkpoint  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def test_each_format_reports_its_save_and_restore(tmp_path, capsys):
    bench_disk_checkpoint.main(["--table-mb", "20", "--item-bytes", "100000", "--dir", str(tmp_path)])
    lines = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("format="):
            fields = dict(re.findall(r"(\w+)=([\d.]+|\w+)", line))
            lines[fields["format"]] = fields
    assert set(lines) == {"copying", "referencing"}
    for fields in lines.values():
        assert int(fields["items"]) == 200
        assert float(fields["save_s"]) > 0 and float(fields["restore_s"]) > 0
    assert float(lines["copying"]["save_written_mb"]) >= 20 and float(lines["copying"]["checkpoint_own_mb"]) >= 20
    assert float(lines["copying"]["restore_written_mb"]) >= 20  # the bytes written into new segments
    assert float(lines["referencing"]["save_written_mb"]) < 1 and float(lines["referencing"]["checkpoint_own_mb"]) < 1
    assert float(lines["referencing"]["restore_written_mb"]) < 1
    assert os.listdir(tmp_path) == []  # its temporary directory is gone
