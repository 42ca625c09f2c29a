"""docs/architecture.md's "Adding an algorithm", followed literally: a tiny policy-gradient
algorithm in a package of its own (policy, config, trainer, lazy exports), registered by name,
declared in ALGORITHM_KEYS, checked the way every shipped algorithm is, acting in numpy on
remote workers, and trained for an iteration on CartPole."""
import math
import sys
import textwrap

import pytest

from tfrl import registry
from tfrl.agents.pg import config as pg_config
from tfrl.agents.pg import pg as pg_trainer
from tfrl.agents.pg import pg_policy

from . import test_trainer_declarations as declarations

PACKAGE = "tiny_algo"
NAME = "TINY_PG"


def _module_of(obj) -> str:
    """Where the shipped PG takes a name from, so the tiny algorithm imports it the same way."""
    return obj.__module__


def write_package(root):
    """Steps 1-3 and 5: tiny_algo/{config.py, tiny_policy.py, tiny.py, __init__.py}."""
    package = root / PACKAGE
    package.mkdir()
    files = {
        # 2. the default config: only the keys the algorithm adds or changes
        "config.py": f'''
            """TinyPG's DEFAULT_CONFIG."""
            from {_module_of(pg_config.with_common_config)} import with_common_config

            DEFAULT_CONFIG = with_common_config({{
                # discount of the returns-to-go that weight the log-likelihoods
                "gamma": 0.99,
                # extra key of this algorithm: scales the loss
                "tiny_loss_scale": 1.0,
                "train_batch_size": 64,
                "rollout_fragment_length": 32,
                "sgd_minibatch_size": None,
                "num_sgd_iter": 1,
            }})
        ''',
        # 1. the policy: plain functions handed to build_tf_policy
        "tiny_policy.py": f'''
            """TinyPolicy: REINFORCE on returns-to-go."""
            import functools

            from {_module_of(pg_policy.policy_defaults)} import policy_defaults
            from tfrl.policy import (Postprocessing, SampleBatch, build_tf_policy,
                                     compute_advantages, mean_over_valid_rows)
            from {PACKAGE}.config import DEFAULT_CONFIG


            def postprocess_returns(policy, sample_batch, other_agent_batches=None, episode=None):
                return compute_advantages(sample_batch, 0.0, policy.config["gamma"],
                                          use_gae=False, use_critic=False)


            def tiny_loss(policy, model, dist_class, train_batch):
                mean = mean_over_valid_rows(train_batch)
                logits, _ = model.from_batch(train_batch)
                logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
                policy.tiny_loss = -policy.config["tiny_loss_scale"] * mean(
                    logp * train_batch[Postprocessing.ADVANTAGES])
                return policy.tiny_loss


            def tiny_stats(policy, train_batch):
                return {{"tiny_loss": policy.tiny_loss}}


            TinyPolicy = build_tf_policy(
                "TinyPolicy", loss_fn=tiny_loss, postprocess_fn=postprocess_returns,
                stats_fn=tiny_stats,
                get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG))
        ''',
        # 3. the trainer
        "tiny.py": f'''
            """TinyTrainer: TinyPolicy under the strategies PG's data flow allows."""
            from {_module_of(pg_trainer.build_trainer)} import build_trainer
            from tfrl.errors import InvalidConfigError
            from tfrl.optimizers.train_batch import fit_fragments_to_train_batch
            from {PACKAGE}.config import DEFAULT_CONFIG
            from {PACKAGE}.tiny_policy import TinyPolicy


            def validate_config(config):
                if config["tiny_loss_scale"] <= 0:
                    raise InvalidConfigError("tiny_loss_scale must be positive")
                fit_fragments_to_train_batch(config, "{NAME}")


            def make_policy_optimizer(workers, config, replay):
                from tfrl.optimizers.selection import choose_policy_optimizer

                return choose_policy_optimizer(
                    workers, config, replay, allowed=("sync_samples", "allreduce"),
                    default="sync_samples", algorithm="{NAME}")


            TinyTrainer = build_trainer(
                "{NAME}", default_policy=TinyPolicy, default_config=DEFAULT_CONFIG,
                validate_config=validate_config, make_policy_optimizer=make_policy_optimizer)
        ''',
        # 5. lazy exports: importing the package imports none of its modules
        "__init__.py": f'''
            """A tiny algorithm, added as docs/architecture.md says."""
            from tfrl.utils.lazy_exports import lazy_exports

            _EXPORTS = {{"DEFAULT_CONFIG": "{PACKAGE}.config", "TinyTrainer": "{PACKAGE}.tiny",
                        "TinyPolicy": "{PACKAGE}.tiny_policy"}}
            __all__ = list(_EXPORTS)
            __getattr__ = lazy_exports(__name__, _EXPORTS)
        ''',
    }
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())


@pytest.fixture
def tiny_algorithm(tmp_path, monkeypatch):
    write_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # 4. register the name (the line a real algorithm adds to ALGORITHMS in registry.py)
    monkeypatch.setitem(registry.ALGORITHMS, NAME, (f"{PACKAGE}.tiny", "TinyTrainer"))
    yield
    from ray import cloudpickle

    for module in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        if module != PACKAGE:
            cloudpickle.unregister_pickle_by_value(sys.modules[module])
        del sys.modules[module]


@pytest.mark.timeout(300)
def test_an_algorithm_added_as_documented_trains(tiny_algorithm, ray_session, monkeypatch):
    import tiny_algo

    # 5. the package imports its modules on first use only
    assert not [m for m in sys.modules if m.startswith(PACKAGE + ".")]
    assert tiny_algo.TinyTrainer is registry.get_trainer_class(NAME)
    # A real algorithm lives in tfrl/agents, importable wherever Ray starts a worker; this one
    # lives in a temporary directory the workers' sys.path lacks, so its code travels by value.
    from ray import cloudpickle

    for module in [m for m in sys.modules if m.startswith(PACKAGE + ".")]:
        cloudpickle.register_pickle_by_value(sys.modules[module])

    # 7. without its ALGORITHM_KEYS entry the declarations' checks fail; with it they pass
    with pytest.raises(KeyError):
        declarations.test_trainer_class_imports_and_merges_its_default_config(NAME)
    monkeypatch.setitem(declarations.ALGORITHM_KEYS, NAME, ("tiny_loss_scale", "gamma"))
    declarations.test_trainer_class_imports_and_merges_its_default_config(NAME)
    declarations.test_policy_defaults_build_a_policy_directly(NAME)

    trainer_class = registry.get_trainer_class(NAME)
    config = {"num_workers": 1, "num_cpus_per_worker": 0, "model": {"fcnet_hiddens": [8]},
              "seed": 0}
    trainer = trainer_class(env="CartPole-v1", config=config)
    try:
        # 6. a policy built like PG's gets a numpy stand-in on its remote workers ...
        from tfrl.policy.numpy_policy import numpy_policy_spec

        assert numpy_policy_spec(trainer.get_policy()) is not None
        result = trainer.train()
        assert trainer.workers.foreach_worker(
            lambda w: ("tensorflow" in sys.modules, repr(w.get_policy())), local_worker=False) == [
            (False, "NumpyPolicy(TinyPolicy, numpy only)")]
    finally:
        trainer.stop()
    assert result["timesteps_total"] >= 64
    assert math.isfinite(result["info"]["learner"]["default_policy"]["tiny_loss"])
    assert result["info"]["num_steps_trained"] >= 64

    # ... and a with_updates variant that adds action outputs silently acts with TensorFlow
    import gymnasium as gym

    variant = tiny_algo.TinyPolicy.with_updates(
        name="TinyWithExtras",
        extra_action_out_fn=lambda policy: {"vf_preds": policy.model.value_function()})
    env = gym.make("CartPole-v1")
    policy = variant(env.observation_space, env.action_space, {"model": {"fcnet_hiddens": [8]}})
    assert numpy_policy_spec(policy) is None

    # 3. validate_config refuses what the algorithm cannot run
    from tfrl.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="tiny_loss_scale"):
        trainer_class(env="CartPole-v1", config=dict(config, tiny_loss_scale=0.0))
