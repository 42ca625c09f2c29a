"""IS, WIS, DR and DM on CartPole-v1 with a known behaviour policy: estimates vs the true return.

    python tools/bench_off_policy.py [--seeds 10] [--steps 8000] [--truth-episodes 1000]

Per seed, a rollout worker records `--steps` env steps of whole episodes with a uniformly random
behaviour policy (`output`); a second worker reads them back in one evaluation pass (`input`,
`input_evaluation: ["is", "wis", "dr", "dm"]`) with a target policy that pushes right with
probability 0.65 whatever it sees; the truth is the target's mean return over
`--truth-episodes` played episodes (gamma 1), measured once. Prints one line per seed and a
summary line per estimator: the mean, spread and worst of its relative error, and how many
seeds are within 10% of the truth.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

P_TARGET = 0.65
ESTIMATORS = {"is": "V_step_IS", "wis": "V_step_WIS", "dr": "V_step_DR", "dm": "V_step_DM"}


def constant_weights(policy, p_right):
    kernel, bias, *value = policy.get_weights()
    return [np.zeros_like(kernel), np.array([0.0, np.log(p_right / (1 - p_right))], bias.dtype),
            *value]


def one_seed(seed: int, steps: int) -> dict:
    from tfrl.agents.pg import PGTFPolicy
    from tfrl.rollout import RolloutWorker

    base = {"model": {"fcnet_hiddens": []}, "gamma": 1.0, "seed": seed,
            "batch_mode": "complete_episodes", "rollout_fragment_length": 200}
    with tempfile.TemporaryDirectory() as out:
        recorder = RolloutWorker("CartPole-v1", PGTFPolicy, config=dict(base, output=out))
        recorder.get_policy().set_weights(constant_weights(recorder.get_policy(), 0.5))
        recorded = 0
        while recorded < steps:
            recorded += recorder.sample().count
        recorder.stop()
        reader = RolloutWorker("CartPole-v1", PGTFPolicy, config=dict(
            base, input=out, input_evaluation=list(ESTIMATORS)))
        reader.get_policy().set_weights(constant_weights(reader.get_policy(), P_TARGET))
        read = 0
        while read < recorded - 200:  # one pass over the files
            read += reader.sample().count
        estimates = reader.get_metrics()
        reader.stop()
    values = {name: [e.metrics[metric] for e in estimates if e.estimator_name == name]
              for name, metric in ESTIMATORS.items()}
    return {"episodes": len(values["is"]),
            "behaviour": float(np.mean([e.metrics["V_prev"] for e in estimates])),
            **{name: float(np.mean(v)) for name, v in values.items()}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=8000)
    parser.add_argument("--truth-episodes", type=int, default=1000)
    args = parser.parse_args(argv)
    from tfrl.agents.pg import PGTFPolicy
    from tfrl.rollout import RolloutWorker

    truth_worker = RolloutWorker("CartPole-v1", PGTFPolicy, config={
        "model": {"fcnet_hiddens": []}, "seed": 12345, "batch_mode": "complete_episodes",
        "rollout_fragment_length": 1})
    truth_worker.get_policy().set_weights(constant_weights(truth_worker.get_policy(), P_TARGET))
    returns = []
    while len(returns) < args.truth_episodes:
        truth_worker.sample()
        returns.extend(m.episode_reward for m in truth_worker.get_metrics())
    truth = float(np.mean(returns))
    print(f"truth episodes={len(returns)} mean_return={truth:.2f} "
          f"standard_error={np.std(returns) / np.sqrt(len(returns)):.2f}", flush=True)
    errors = {name: [] for name in ESTIMATORS}
    for seed in range(args.seeds):
        r = one_seed(seed, args.steps)
        for name in ESTIMATORS:
            errors[name].append(r[name] / truth - 1)
        print(f"seed={seed} episodes={r['episodes']} behaviour_return={r['behaviour']:.2f} "
              + " ".join(f"{name}={r[name]:.2f}" for name in ESTIMATORS), flush=True)
    for name, v in errors.items():
        print(f"{name}_rel_error_mean={np.mean(v):+.3f} {name}_rel_error_std={np.std(v):.3f} "
              f"{name}_worst={max(v, key=abs):+.3f} "
              f"{name}_within_10pct={sum(abs(x) <= 0.1 for x in v)}/{len(v)}", flush=True)


if __name__ == "__main__":
    main()
