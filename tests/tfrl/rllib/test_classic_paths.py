"""`tfrl.rllib` mirrors classic RLlib's module paths with tfrl's own objects (no copies), stays
cheap to import, and refuses what tfrl does not have with a clear error."""
import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# classic path -> (name there, tfrl module, name in tfrl)
SAME_OBJECTS = [
    ("tfrl.rllib.agents.ppo", "PPOTrainer", "tfrl.agents.ppo.ppo", "PPOTrainer"),
    ("tfrl.rllib.agents.ppo", "DEFAULT_CONFIG", "tfrl.agents.ppo.config", "DEFAULT_CONFIG"),
    ("tfrl.rllib.agents.ppo.ppo_tf_policy", "PPOTFPolicy", "tfrl.agents.ppo.ppo_policy", "PPOTFPolicy"),
    ("tfrl.rllib.agents.ppo.ppo_tf_policy", "ppo_surrogate_loss", "tfrl.agents.ppo.ppo_policy",
     "ppo_surrogate_loss"),
    ("tfrl.rllib.agents.ppo.ppo_policy", "postprocess_ppo_gae", "tfrl.policy.postprocessing",
     "compute_gae_for_sample_batch"),
    ("tfrl.rllib.agents.ppo.ppo_policy", "KLCoeffMixin", "tfrl.policy.mixins", "KLCoeffMixin"),
    ("tfrl.rllib.agents.dqn", "DQNTrainer", "tfrl.agents.dqn.dqn", "DQNTrainer"),
    ("tfrl.rllib.agents.dqn.simple_q_policy", "build_q_models", "tfrl.agents.dqn.dqn_policy",
     "build_q_models"),
    ("tfrl.rllib.agents.dqn.simple_q_policy", "build_action_sampler", "tfrl.agents.dqn.dqn_policy",
     "sample_epsilon_greedy"),
    ("tfrl.rllib.agents.dqn", "ApexTrainer", "tfrl.agents.dqn.apex", "ApexTrainer"),
    ("tfrl.rllib.agents.ppo", "APPOTrainer", "tfrl.agents.impala.appo", "APPOTrainer"),
    ("tfrl.rllib.agents.impala", "ImpalaTrainer", "tfrl.agents.impala.impala", "ImpalaTrainer"),
    ("tfrl.rllib.agents.impala.vtrace_tf_policy", "VTraceTFPolicy", "tfrl.agents.impala.impala_policy",
     "VTraceTFPolicy"),
    ("tfrl.rllib.agents.ddpg", "TD3Trainer", "tfrl.agents.ddpg.td3", "TD3Trainer"),
    ("tfrl.rllib.agents.ddpg.ddpg_tf_policy", "DDPGTFPolicy", "tfrl.agents.ddpg.ddpg_policy", "DDPGTFPolicy"),
    ("tfrl.rllib.agents.sac", "SACTrainer", "tfrl.agents.sac.sac", "SACTrainer"),
    ("tfrl.rllib.agents.marwil", "BCTrainer", "tfrl.agents.marwil.marwil", "BCTrainer"),
    ("tfrl.rllib.agents.marwil.marwil_policy", "MARWILPolicy", "tfrl.agents.marwil.marwil_policy",
     "MARWILTFPolicy"),
    ("tfrl.rllib.agents.pg", "PGTrainer", "tfrl.agents.pg.pg", "PGTrainer"),
    ("tfrl.rllib.agents.a3c", "A2CTrainer", "tfrl.agents.a3c.a2c", "A2CTrainer"),
    ("tfrl.rllib.agents.trainer", "with_common_config", "tfrl.config", "with_common_config"),
    ("tfrl.rllib.agents.trainer_template", "build_trainer", "tfrl.trainer_template", "build_trainer"),
    ("tfrl.rllib.agents.registry", "get_agent_class", "tfrl.registry", "get_trainer_class"),
    ("tfrl.rllib.policy", "Policy", "tfrl.policy.policy", "Policy"),
    ("tfrl.rllib.policy", "TFPolicy", "tfrl.policy.tf_policy", "TFPolicy"),
    ("tfrl.rllib.policy.tf_policy", "LearningRateSchedule", "tfrl.policy.mixins", "LearningRateSchedule"),
    ("tfrl.rllib.policy.tf_policy_template", "build_tf_policy", "tfrl.policy.tf_policy_template",
     "build_tf_policy"),
    ("tfrl.rllib.policy.sample_batch", "SampleBatch", "tfrl.policy.sample_batch", "SampleBatch"),
    ("tfrl.rllib.evaluation", "RolloutWorker", "tfrl.rollout.rollout_worker", "RolloutWorker"),
    ("tfrl.rllib.evaluation.worker_set", "WorkerSet", "tfrl.rollout.worker_set", "WorkerSet"),
    ("tfrl.rllib.evaluation.postprocessing", "Postprocessing", "tfrl.policy.postprocessing",
     "Postprocessing"),
    ("tfrl.rllib.evaluation.postprocessing", "compute_advantages", "tfrl.policy.postprocessing",
     "compute_advantages"),
    ("tfrl.rllib.models", "ModelCatalog", "tfrl.models.catalog", "ModelCatalog"),
    ("tfrl.rllib.models", "ModelV2", "tfrl.models.tf_model", "TFModel"),
    ("tfrl.rllib.models.tf.tf_modelv2", "TFModelV2", "tfrl.models.tf_model", "TFModel"),
    ("tfrl.rllib.env", "MultiAgentEnv", "tfrl.env.multi_agent_env", "MultiAgentEnv"),
    ("tfrl.rllib.optimizers", "AsyncGradientsOptimizer", "tfrl.optimizers.async_gradients_optimizer",
     "AsyncGradientsOptimizer"),
    ("tfrl.rllib.optimizers", "LocalMultiGPUOptimizer", "tfrl.optimizers.multi_device_optimizer",
     "LocalMultiDeviceOptimizer"),
    ("tfrl.rllib.utils.explained_variance", "explained_variance", "tfrl.utils.tf_ops",
     "explained_variance"),
    ("tfrl.rllib.utils.schedules", "PiecewiseSchedule", "tfrl.utils.schedules", "PiecewiseSchedule"),
    ("tfrl.rllib.utils.spaces.repeated", "Repeated", "tfrl.spaces", "Repeated"),
    ("tfrl.rllib.utils.spaces.simplex", "Simplex", "tfrl.spaces", "Simplex"),
    ("tfrl.rllib.utils.spaces.flexdict", "FlexDict", "tfrl.spaces", "FlexDict"),
    ("tfrl.rllib.utils.spaces.space_utils", "flatten_space", "tfrl.spaces", "flatten_space"),
    ("tfrl.rllib.utils.spaces.space_utils", "unbatch", "tfrl.spaces.structure", "unbatch"),
]


@pytest.mark.parametrize("classic_module,name,module,original", SAME_OBJECTS,
                         ids=[f"{m}.{n}" for m, n, _, _ in SAME_OBJECTS])
def test_classic_names_are_the_projects_own_objects(classic_module, name, module, original):
    classic = getattr(importlib.import_module(classic_module), name)
    assert classic is getattr(importlib.import_module(module), original)


def test_importing_the_namespace_imports_no_tensorflow_and_registers_the_algorithms():
    code = ("import sys, tfrl.rllib\n"
            "from ray.tune.registry import _global_registry, TRAINABLE_CLASS\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
            "assert 'tfrl.agents.ppo.ppo' not in sys.modules\n"
            "assert _global_registry.contains(TRAINABLE_CLASS, 'PPO')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_classic_env_interfaces_are_tfrls():
    from tfrl.env.base_env import BaseEnv as TfrlBaseEnv
    from tfrl.env.vector_env import VectorEnv as TfrlVectorEnv
    from tfrl.rllib.env import BaseEnv, VectorEnv
    from tfrl.rllib.env.base_env import BaseEnv as ClassicBaseEnv
    from tfrl.rllib.env.vector_env import VectorEnv as ClassicVectorEnv

    # the classes rollout workers sample (tests/tfrl/rllib/test_classic_vector_and_base_envs.py)
    assert ClassicVectorEnv is VectorEnv and ClassicBaseEnv is BaseEnv is TfrlBaseEnv
    assert TfrlVectorEnv is VectorEnv

    class PollingEnv(BaseEnv):
        def poll(self):
            return {}, {}, {}, {}, {}

    assert PollingEnv().poll() == ({}, {}, {}, {}, {})
    with pytest.raises(ImportError, match="PolicyServerPerWorker"):
        from tfrl.rllib.env import PolicyServerInput  # noqa: F401


def test_classic_external_env_paths_are_tfrls_serving_bridge():
    from tfrl import env, serving
    from tfrl.rllib.env import ExternalEnv, ExternalMultiAgentEnv, PolicyClient

    assert (ExternalEnv, ExternalMultiAgentEnv) == (env.ExternalEnv, env.ExternalMultiAgentEnv)
    assert PolicyClient is serving.PolicyClient


def test_optimizers_of_other_tfrl_modules_appear_once_those_modules_exist():
    present = importlib.util.find_spec("tfrl.optimizers.async_samples_optimizer") is not None
    if present:
        from tfrl.optimizers.async_samples_optimizer import AsyncSamplesOptimizer as core
        from tfrl.rllib.optimizers import AsyncSamplesOptimizer
        assert AsyncSamplesOptimizer is core
    else:
        with pytest.raises(ImportError, match="needs tfrl.optimizers.async_samples_optimizer"):
            from tfrl.rllib.optimizers import AsyncSamplesOptimizer  # noqa: F401


def test_override_checks_the_parent_method_exists():
    from tfrl.rllib.policy import Policy
    from tfrl.rllib.utils.annotations import override

    class Mine(Policy):
        @override(Policy)
        def learn_on_batch(self, samples):
            return {"rows": samples.count}

    assert Mine.learn_on_batch.__name__ == "learn_on_batch"
    with pytest.raises(NameError, match="learn_on_bach does not override any method of Policy"):
        class Typo(Policy):
            @override(Policy)
            def learn_on_bach(self, samples):
                return {}


def test_try_import_tf_serves_both_classic_forms():
    import tensorflow

    from tfrl.rllib.utils import try_import_tf, try_import_torch

    tf = try_import_tf()  # Ray 0.8: the module
    assert tf.reduce_sum is tensorflow.reduce_sum
    tf1, tf2, version = try_import_tf()  # Ray 1.x: a triple
    assert tf1.placeholder is tensorflow.compat.v1.placeholder and version == 2
    assert tf2.reduce_sum is tensorflow.reduce_sum and tf2.nn is tensorflow.nn
    # classic RLlib's tf.keras was Keras 2: tf_keras, whose models are tf.Modules
    import tf_keras
    assert tf.keras is tf_keras and tf2.keras is tf_keras and tf1.keras is tf_keras
    # functions using the returned tf capture it; Ray pickles them to other processes
    import pickle

    from ray import cloudpickle
    copied = pickle.loads(cloudpickle.dumps((tf1, tf2)))
    assert copied[1].keras is tf_keras and copied[0].placeholder is tf1.placeholder
    torch, nn = try_import_torch()  # classic 1.x without torch: None and an nn stand-in
    assert torch is None and nn.functional is None
    with pytest.raises(ImportError, match="TensorFlow only"):
        try_import_torch(error=True)


def test_collect_metrics_summarizes_a_workers_finished_episodes():
    import gymnasium as gym

    from tfrl.rllib.evaluation import RolloutWorker
    from tfrl.rllib.evaluation.metrics import collect_metrics
    from tfrl.rllib.policy import Policy

    class RandomPolicy(Policy):
        def compute_actions(self, obs_batch, state_batches=None, **kwargs):
            return [self.action_space.sample() for _ in obs_batch], [], {}

    worker = RolloutWorker(lambda c: gym.make("CartPole-v1"), RandomPolicy,
                           {"rollout_fragment_length": 100, "batch_mode": "complete_episodes"})
    worker.sample()
    metrics = collect_metrics(worker)
    assert metrics["episodes_this_iter"] >= 1
    assert metrics["episode_len_mean"] == metrics["episode_reward_mean"] > 0  # CartPole: 1 a step


def test_torch_model_modules_import_and_refuse_construction():
    """Classic example modules define torch models at import time (`class M(TorchModelV2,
    nn.Module)`) without torch installed; constructing one raises."""
    from tfrl.errors import FrameworkNotAvailableError
    from tfrl.rllib.models.torch.fcnet import FullyConnectedNetwork as TorchFC
    from tfrl.rllib.models.torch.misc import SlimFC, same_padding
    from tfrl.rllib.models.torch.torch_modelv2 import TorchModelV2
    from tfrl.rllib.policy.torch_policy_template import build_torch_policy
    from tfrl.rllib.utils.framework import try_import_torch
    from tfrl.rllib.utils.torch_ops import FLOAT_MIN

    _, nn = try_import_torch()

    class MyTorchModel(TorchModelV2, nn.Module):
        pass

    for cls in (MyTorchModel, TorchFC, SlimFC, build_torch_policy("MyTorchPolicy")):
        with pytest.raises(FrameworkNotAvailableError, match="TensorFlow only"):
            cls()
    assert same_padding((84, 84), 8, 4) == ((2, 2, 2, 2), (21, 21))  # 20 * 4 + 8 - 84 = 4
    assert FLOAT_MIN < -1e38


def test_a_custom_policy_may_override_compute_log_likelihoods():
    from tfrl.errors import NotSupportedError
    from tfrl.rllib.policy.policy import Policy
    from tfrl.rllib.utils.annotations import override

    class RandomPolicy(Policy):  # multi_agent_custom_policy.py's shape
        @override(Policy)
        def compute_log_likelihoods(self, actions, obs_batch, state_batches=None,
                                    prev_action_batch=None, prev_reward_batch=None):
            return [0.0] * len(actions)

    assert RandomPolicy.compute_log_likelihoods(None, [1, 2], None) == [0.0, 0.0]
    with pytest.raises(NotSupportedError):
        Policy.compute_log_likelihoods(Policy.__new__(Policy), [1], [0])
