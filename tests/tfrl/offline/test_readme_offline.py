"""The "Learning from recorded experience" example of docs/training.md runs as shown (with a small
network, small batches and one recording iteration instead of ten)."""
import math
import os
import re

import pytest

GUIDE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "training.md")
SMALL = {"num_workers": 1, "num_cpus_per_worker": 0, "train_batch_size": 600,
         "sgd_minibatch_size": 200, "num_sgd_iter": 2, "rollout_fragment_length": 100,
         "model": {"fcnet_hiddens": [16]}, "evaluation_num_episodes": 2}


def readme_example():
    text = open(GUIDE).read()
    section = text[text.index("## Learning from recorded experience"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.timeout(300)
def test_the_readme_records_learns_and_estimates(ray_session, tmp_path, capsys):
    code = readme_example()
    out = str(tmp_path / "cartpole-out")
    assert '"/tmp/cartpole-out"' in code and "range(10)" in code
    code = (code.replace('"/tmp/cartpole-out"', repr(out)).replace("range(10)", "range(1)")
            .replace('"env": "CartPole-v1", ', '"env": "CartPole-v1", **SMALL, '))
    namespace = {"SMALL": SMALL}
    exec(compile(code, "docs/training.md", "exec"), namespace)
    assert os.listdir(out), "nothing was recorded"
    result = namespace["result"]
    wis, played = (float(x) for x in capsys.readouterr().out.split()[-2:])
    assert wis == result["off_policy_estimator"]["wis"]["V_step_WIS"]
    assert result["off_policy_estimator"]["wis"]["num_episodes"] > 0
    assert math.isfinite(wis) and 8 <= played <= 500
