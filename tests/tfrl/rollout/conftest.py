"""Fixtures of the rollout tests: small real policies, Ray-ready."""
import os
import sys

import ray.cloudpickle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rollout_test_policies  # noqa: E402

# Ray actors cannot import test modules; Ray's pickler ships the test policies by value.
ray.cloudpickle.register_pickle_by_value(rollout_test_policies)
