"""Fixtures of the rollout tests: small real policies, Ray-ready."""
import ray.cloudpickle

import rollout_test_policies

# Ray actors cannot import test modules; Ray's pickler ships the test policies by value.
ray.cloudpickle.register_pickle_by_value(rollout_test_policies)
