"""The cluster examples (examples/cluster/: Ray's cluster launcher YAML and the KubeRay manifests)
hold together: the launcher YAML is valid for Ray's own schema, the `tfrl train` command each
runs parses with tfrl's CLI into a config tfrl accepts, every resource that config asks for is
offered by the node types or worker groups that should offer it (enough of it for the workers
asked for), the credential files it names are where the example puts them, and the README's
"Run on a cluster" config asks for the same resources. The launcher's command is the one
docs/cluster.md gives in its step-by-step section."""
import ast
import json
import os
import re
import shlex

import pytest
import yaml

from tfrl.registry import get_trainer_class
from tfrl.cli import _build_parser, load_experiment_file
from tfrl.config import merge_config
from tfrl.replay_hosting import ReplayHosting

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLES = os.path.join(ROOT, "examples", "cluster")
PLACEMENT_KEYS = ("custom_resources_per_worker", "learner_resources", "replay_resources")


def read(name: str) -> str:
    with open(os.path.join(EXAMPLES, name), encoding="utf-8") as f:
        return f.read()


def train_config(command: str) -> dict:
    """The trainer config a `tfrl train ...` command line runs with, as tfrl's CLI builds it."""
    argv = shlex.split(command)
    assert argv[:2] == ["tfrl", "train"], command
    args = _build_parser().parse_args(argv[1:])
    experiment = load_experiment_file(args.file)
    config = dict(experiment["config"], **args.config)
    if args.num_workers is not None:
        config["num_workers"] = args.num_workers
    # every key is one the algorithm knows (a typo would stop the run on the cluster)
    merge_config(get_trainer_class(experiment["run"]).default_config(), config)
    # the placement keys pass the trainer's own checks (credentials aside: they exist there only)
    ReplayHosting.from_config({k: v for k, v in config.items()
                               if k.startswith("replay_") and not k.endswith("_file")})
    return config


def launcher_steps() -> str:
    """docs/cluster.md's steps for cluster.yaml."""
    with open(os.path.join(ROOT, "docs", "cluster.md"), encoding="utf-8") as f:
        guide = f.read()
    section = guide[guide.index("## Ray's cluster launcher, step by step"):]
    section = section[:section.index("\n## ", 1)]
    assert "examples/cluster/cluster.yaml" in section
    return section


def launcher_command() -> str:
    """The `tfrl train` command of docs/cluster.md's steps for cluster.yaml (continued lines
    joined)."""
    section = launcher_steps()
    lines = [line.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)
             for line in block.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("tfrl train"))
    command = []
    for line in lines[start:]:
        command.append(line.rstrip("\\").strip())
        if line.endswith("}'"):
            return " ".join(command)
    raise AssertionError("the tfrl train command in docs/cluster.md does not end with its --config")


def assert_resources_offered(config: dict, head: dict, workers: dict) -> None:
    """`head`: the head's resources; `workers`: group -> (resources per node, max nodes)."""
    for name, amount in config["learner_resources"].items():
        assert head.get(name, 0) >= amount, f"the head does not offer the learner's {name}"
    for name, amount in config["replay_resources"].items():
        assert any(res.get(name, 0) >= amount for res, _ in workers.values()), \
            f"no worker group offers the replay server's {name}"
    for name, amount in config["custom_resources_per_worker"].items():
        capacity = sum(res.get(name, 0) * count for res, count in workers.values())
        assert capacity >= amount * config["num_workers"], \
            f"{config['num_workers']} rollout workers need {name} the groups do not offer"
        assert head.get(name, 0) == 0, "rollout workers would compete with the learner"


def test_the_launcher_yaml_is_valid_and_offers_what_its_command_asks_for():
    import jsonschema
    import ray

    text = read("cluster.yaml")
    cluster = yaml.safe_load(text)
    with open(os.path.join(os.path.dirname(ray.__file__), "autoscaler", "ray-schema.json")) as f:
        jsonschema.validate(cluster, json.load(f))

    config = train_config(launcher_command())
    types = cluster["available_node_types"]
    head = types[cluster["head_node_type"]]["resources"]
    workers = {name: (t["resources"], t["max_workers"]) for name, t in types.items()
               if name != cluster["head_node_type"]}
    assert_resources_offered(config, head, workers)
    assert config["replay_bind_address"] == "node"

    # the credentials are where file_mounts and replay_cert.sh put them, on the head's home
    home = f"/home/{cluster['auth']['ssh_user']}"
    assert "~/tfrl-secrets" in cluster["file_mounts"]
    assert config["replay_token_file"] == f"{home}/tfrl-secrets/replay-token"
    assert re.search(r"replay_cert\.sh ~/tfrl-secrets\b", launcher_steps())
    assert config["replay_tls_certificate_file"] == f"{home}/tfrl-secrets/replay-cert.pem"
    assert config["replay_tls_private_key_file"] == f"{home}/tfrl-secrets/replay-key.pem"
    # Ray's token reaches every node: both start commands load the environment setting it
    env_setup = " ".join(cluster["setup_commands"])
    assert "RAY_AUTH_TOKEN_PATH=$HOME/tfrl-secrets/ray-token" in env_setup
    for start in ("head_start_ray_commands", "worker_start_ray_commands"):
        assert all(c.startswith("source ~/tfrl-env.sh") for c in cluster[start])


def test_the_kuberay_job_runs_on_the_cluster_that_offers_what_it_asks_for():
    ray_cluster, job = yaml.safe_load_all(read("kuberay.yaml"))
    assert (ray_cluster["kind"], job["kind"]) == ("RayCluster", "RayJob")
    assert job["spec"]["clusterSelector"]["ray.io/cluster"] == ray_cluster["metadata"]["name"]

    def offered(group: dict) -> dict:
        # rayStartParams.resources is a JSON object inside a quoted string, as `ray start` takes it
        return json.loads(yaml.safe_load(group["rayStartParams"]["resources"]))

    spec = ray_cluster["spec"]
    head = offered(spec["headGroupSpec"])
    workers = {g["groupName"]: (offered(g), g["maxReplicas"]) for g in spec["workerGroupSpecs"]}
    for group in spec["workerGroupSpecs"]:  # what a pod offers fits the CPUs it gets
        assert int(group["rayStartParams"]["num-cpus"]) <= int(
            group["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"])

    steps = [step.strip() for step in job["spec"]["entrypoint"].split("&&")]
    config = train_config(next(step for step in steps if step.startswith("tfrl train")))
    assert_resources_offered(config, head, workers)

    # the token comes from the secret mounted on the head (where the driver runs), the TLS
    # files from the directory replay_cert.sh writes before training starts
    mounts = spec["headGroupSpec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert os.path.dirname(config["replay_token_file"]) in {m["mountPath"] for m in mounts}
    assert "replay_cert.sh" in steps[0]  # before training starts
    cert_dir = shlex.split(steps[0])[-1]
    assert config["replay_tls_certificate_file"] == f"{cert_dir}/replay-cert.pem"
    assert config["replay_tls_private_key_file"] == f"{cert_dir}/replay-key.pem"
    # every Ray pod and the submitter present Ray's token
    pods = [spec["headGroupSpec"]] + spec["workerGroupSpecs"] + [
        {"template": job["spec"]["submitterPodTemplate"]}]
    for pod in pods:
        env = {e["name"]: e for e in pod["template"]["spec"]["containers"][0]["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token" and "RAY_AUTH_TOKEN" in env


def readme_cluster_section() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("## Run on a cluster")
    return text[start:text.index("\n## ", start + 1)]


@pytest.mark.parametrize("example", ["cluster.yaml", "kuberay.yaml"])
def test_the_readme_config_asks_for_the_resources_the_examples_declare(example):
    section = readme_cluster_section()
    assert f"examples/cluster/{example}" in section
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    call = next(node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)
                and any(k.arg == "config" for k in node.keywords))
    readme = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "config"))
    text = read(example)
    if example == "cluster.yaml":
        example_config = train_config(launcher_command())
    else:
        steps = yaml.safe_load_all(text)
        next(steps)
        entrypoint = next(steps)["spec"]["entrypoint"]
        example_config = train_config(next(s.strip() for s in entrypoint.split("&&")
                                           if s.strip().startswith("tfrl train")))
    for key in PLACEMENT_KEYS + ("replay_bind_address",):
        assert readme[key] == example_config[key], key
