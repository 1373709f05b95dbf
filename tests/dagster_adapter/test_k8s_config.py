"""The Kubernetes deployment in deploy/, checked by what runs here (no cluster, no docker daemon,
no Helm): the run config against `k8s_job_executor`'s own config schema and the real jobs of the
k8s code location; the Job that dagster-k8s's own executor code sends to the API server for one
step; the Helm values against the chart's keys; the Dockerfile against the repository's pins and
paths; and the three files against each other. Each check is a function returning problems, so a
planted fault shows it fails with the exact message."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import shlex
import threading
import tomllib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster_k8s import k8s_job_executor

from specops_dag.dagster_adapter.definitions import SNAPSHOT_OF, build_definitions
from specops_dag.delivery.store import Store
from specops_dag.execution.attempt import cache_dirs

from ..support.harness import REPO

DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
K8S_DEFINITIONS = DEPLOY / "k8s" / "definitions.py"
RUN_CONFIG = DEPLOY / "k8s" / "run_config.yaml"
VALUES = DEPLOY / "helm" / "values.yaml"

# The keys of the official chart these values may use, from the pydantic models its
# values.schema.json is generated from (dagster-io/dagster, helm/dagster/schema/schema/charts/, the
# 1.13 line; no network in tests). A list's items are `[]`; OPAQUE keys hold Kubernetes objects or
# lists of strings that the chart passes through whole, so what is inside them is not a chart key.
CHART = "dagster-io/dagster helm/dagster/schema/schema/charts/"
DEPLOYMENT = "dagster-user-deployments.deployments[]"
LAUNCHER = "runLauncher.config.k8sRunLauncher"
CHART_KEYS = {
    "dagster/values.py (DagsterHelmValues)": (
        "dagsterWebserver", "dagster-user-deployments", "postgresql",
        "generatePostgresqlPasswordSecret", "generateCeleryConfigSecret", "rabbitmq", "redis",
        "flower", "ingress", "imagePullSecrets", "computeLogManager", "scheduler", "runLauncher",
        "pythonLogs", "dagsterDaemon", "busybox", "migrate", "telemetry", "serviceAccount",
        "global", "retention", "concurrency", "additionalInstanceConfig"),
    "dagster/subschema/global_.py (Global)": (
        "global.postgresqlSecretName", "global.dagsterHome", "global.serviceAccountName",
        "global.celeryConfigSecretName"),
    "dagster_user_deployments/subschema/user_deployments.py (UserDeployments, UserDeployment)": (
        "dagster-user-deployments.enabled", "dagster-user-deployments.enableSubchart",
        "dagster-user-deployments.imagePullSecrets", "dagster-user-deployments.deployments",
        *(f"{DEPLOYMENT}.{k}" for k in (
            "name", "image", "image.repository", "image.tag", "image.pullPolicy",
            "dagsterApiGrpcArgs", "codeServerArgs", "includeConfigInLaunchedRuns",
            "includeConfigInLaunchedRuns.enabled", "deploymentNamespace", "port", "env",
            "envConfigMaps", "envSecrets", "annotations", "nodeSelector", "affinity",
            "tolerations", "podSecurityContext", "securityContext", "resources", "labels",
            "volumeMounts", "volumes", "schedulerName"))),
    "dagster/subschema/run_launcher.py (RunLauncher, K8sRunLauncherConfig, RunK8sConfig)": (
        "runLauncher.type", "runLauncher.config", LAUNCHER,
        *(f"{LAUNCHER}.{k}" for k in (
            "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "kubeconfigFile",
            "envConfigMaps", "envSecrets", "envVars", "volumeMounts", "volumes", "labels",
            "failPodOnRunFailure", "resources", "schedulerName", "securityContext",
            "runK8sConfig", "runK8sConfig.containerConfig", "runK8sConfig.podSpecConfig",
            "runK8sConfig.podTemplateSpecMetadata", "runK8sConfig.jobSpecConfig",
            "runK8sConfig.jobMetadata"))),
    "dagster/subschema/postgresql.py (PostgreSQL)": tuple(f"postgresql.{k}" for k in (
        "image", "enabled", "postgresqlHost", "postgresqlUsername", "postgresqlPassword",
        "postgresqlDatabase", "postgresqlParams", "postgresqlScheme", "service", "service.port")),
    "dagster/subschema/concurrency.py (Concurrency)": tuple(f"concurrency.{k}" for k in (
        "enabled", "pools", "pools.defaultLimit", "pools.granularity", "runs",
        "runs.maxConcurrentRuns", "runs.tagConcurrencyLimits")),
    "dagster/subschema/telemetry.py (Telemetry)": ("telemetry.enabled",),
}
OPAQUE = {*(f"{DEPLOYMENT}.{k}" for k in (
    "dagsterApiGrpcArgs", "codeServerArgs", "env", "envConfigMaps", "envSecrets", "annotations",
    "nodeSelector", "affinity", "tolerations", "podSecurityContext", "securityContext",
    "resources", "labels", "volumeMounts", "volumes")),
          *(f"{LAUNCHER}.{k}" for k in (
              "envConfigMaps", "envSecrets", "envVars", "volumeMounts", "volumes", "labels",
              "resources", "securityContext", "runK8sConfig.containerConfig",
              "runK8sConfig.podSpecConfig", "runK8sConfig.podTemplateSpecMetadata",
              "runK8sConfig.jobSpecConfig", "runK8sConfig.jobMetadata")),
          "postgresql.postgresqlParams", "concurrency.runs.tagConcurrencyLimits",
          "imagePullSecrets", "dagster-user-deployments.imagePullSecrets"}


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


def load_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# --- the run config -------------------------------------------------------------------------


def executor_config_errors(run_config: dict) -> list[str]:
    """What `k8s_job_executor`'s own config schema says of the run config's executor config."""
    result = process_config(k8s_job_executor.config_schema.config_type,
                            run_config["execution"]["config"])
    return [error.message for error in result.errors or []]


@dataclass(frozen=True)
class Location:
    root: Path  # the harness root its definitions were built from
    module: ModuleType  # deploy/k8s/definitions.py, imported


@pytest.fixture(scope="module")
def k8s_location(tmp_path_factory: pytest.TempPathFactory) -> Location:
    """deploy/k8s/definitions.py imported as the code server imports it (building `defs` from
    SPECOPS_ROOT), over a harness root holding only the built-in workflows."""
    root = tmp_path_factory.mktemp("harness")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPECOPS_ROOT", str(root))
        env.delenv(SNAPSHOT_OF, raising=False)
        spec = importlib.util.spec_from_file_location("specops_k8s_definitions", K8S_DEFINITIONS)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return Location(root, module)


def workflow_jobs(defs: dg.Definitions) -> list[dg.JobDefinition]:
    """The jobs of the workflows (`approve_gate` takes its own op config from the Launchpad)."""
    return [job for job in defs.resolve_all_job_defs()
            if job.name != "approve_gate" and not job.name.startswith("__")]


def test_the_run_config_passes_the_executors_own_schema_and_every_workflow_job(
        k8s_location: Location) -> None:
    run_config = load_yaml(RUN_CONFIG)
    assert executor_config_errors(run_config) == []
    jobs = workflow_jobs(k8s_location.module.defs)
    assert {job.name for job in jobs} >= {"quick_delivery_job", "full_delivery_job"}
    for job in jobs:
        dg.validate_run_config(job, run_config)


def test_a_misspelt_executor_key_is_refused_with_dagsters_own_message(
        tmp_path: Path, k8s_location: Location) -> None:
    broken = tmp_path / "run_config.yaml"
    broken.write_text(RUN_CONFIG.read_text().replace("max_concurrent:", "max_concurent:"))
    run_config = load_yaml(broken)
    assert [m.split(". Expected:")[0] for m in executor_config_errors(run_config)] == [
        'Received unexpected config entry "max_concurent" at the root']
    job = k8s_location.module.defs.resolve_job_def("quick_delivery_job")
    with pytest.raises(dg.DagsterInvalidConfigError) as refused:
        dg.validate_run_config(job, run_config)
    assert [e.message.split(". Expected:")[0] for e in refused.value.errors] == [
        'Received unexpected config entry "max_concurent" at path root:execution:config']


def test_every_job_of_the_k8s_location_runs_on_k8s_job_executor_and_nothing_else_differs(
        k8s_location: Location) -> None:
    k8s, default = k8s_location.module.defs, build_definitions(k8s_location.root)
    on_k8s = {job.name: job.executor_def.name for job in k8s.resolve_all_job_defs()}
    by_default = {job.name: job.executor_def.name for job in default.resolve_all_job_defs()}
    assert set(on_k8s) == set(by_default) and "approve_gate" in on_k8s
    assert set(on_k8s.values()) == {"k8s"}
    assert set(by_default.values()) == {"multi_or_in_process_executor"}  # specops_dag unchanged
    assert sorted(k8s.resolve_all_asset_keys()) == sorted(default.resolve_all_asset_keys())
    assert ([s.name for s in k8s.schedules or []], [s.name for s in k8s.sensors or []]) == (
        [s.name for s in default.schedules or []], [s.name for s in default.sensors or []])
    assert set(k8s.resources or {}) == set(default.resources or {}) == {"specops"}


# --- the Job manifest of one step -----------------------------------------------------------


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[tuple[Path, list[tuple[str, dict]]]]:
    """A loopback HTTP server in the Kubernetes API server's place (none runs here): it records
    each POST's path and JSON body and answers 201 with the body, as the API server answers a
    created object. Yields a kubeconfig pointing at it and the records."""
    posted: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            posted.append((self.path, json.loads(body)))
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "here",
        "clusters": [{"name": "here", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "here", "user": {"token": "unused"}}],
        "contexts": [{"name": "here", "context": {"cluster": "here", "user": "here"}}]}))
    try:
        yield kubeconfig, posted
    finally:
        server.shutdown()
        server.server_close()


RUN_K8S_CONFIG = {"containerConfig": "container_config", "podSpecConfig": "pod_spec_config",
                  "podTemplateSpecMetadata": "pod_template_spec_metadata",
                  "jobSpecConfig": "job_spec_config", "jobMetadata": "job_metadata"}


def chart_run_launcher(values: dict, release: str = "dagster") -> dict:
    """The K8sRunLauncher config the chart's `dagsterYaml.runLauncher.k8s` template
    (helm/dagster/templates/helpers/_helpers.tpl) renders into the instance's dagster.yaml from
    these values, as `helm template` would (Helm is not installed here). It covers the keys the
    values use, and refuses one it does not know rather than drop it silently."""
    k8s, chart_global = values["runLauncher"]["config"]["k8sRunLauncher"], values["global"]
    handled = {"imagePullPolicy", "jobNamespace", "loadInclusterConfig", "envVars", "envSecrets",
               "volumes", "volumeMounts", "resources", "runK8sConfig"}
    assert set(k8s) <= handled, f"mirror the chart's template for {sorted(set(k8s) - handled)}"
    return {"load_incluster_config": k8s["loadInclusterConfig"],
            "job_namespace": k8s["jobNamespace"], "image_pull_policy": k8s["imagePullPolicy"],
            "service_account_name": release, "dagster_home": chart_global["dagsterHome"],
            "instance_config_map": f"{release}-instance",
            "postgres_password_secret": chart_global["postgresqlSecretName"],
            "env_vars": k8s.get("envVars", []),
            "env_secrets": [secret["name"] for secret in k8s.get("envSecrets", [])],
            "volumes": k8s.get("volumes", []), "volume_mounts": k8s.get("volumeMounts", []),
            "resources": k8s.get("resources", {}),
            "run_k8s_config": {RUN_K8S_CONFIG[k]: v for k, v in k8s.get("runK8sConfig", {}).items()}}


def step_job(job_name: str, run_config: dict, launcher: dict) -> str:
    """Launch the first step of the k8s location's job as a run worker would: the executor made
    by `k8s_job_executor` itself from the run config, on an instance whose run launcher is
    `launcher`, handed the step's `ExecuteStepArgs`. Returns the step key."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository
    from dagster._core.execution.api import create_execution_plan
    from dagster._core.execution.context.system import PlanData, PlanOrchestrationContext
    from dagster._core.execution.context_creation_job import create_context_free_log_manager
    from dagster._core.execution.retries import RetryMode
    from dagster._core.executor.init import InitExecutorContext
    from dagster._core.executor.step_delegating.step_handler.base import StepHandlerContext
    from dagster._core.test_utils import create_run_for_test, instance_for_test
    from dagster._grpc.types import ExecuteStepArgs

    job = ReconstructableRepository.for_file(str(K8S_DEFINITIONS), "defs", str(K8S_DEFINITIONS.parent)
                                             ).get_reconstructable_job(job_name)
    config = process_config(k8s_job_executor.config_schema.config_type,
                            run_config["execution"]["config"]).value
    overrides = {"run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher",
                                  "config": launcher}}
    with instance_for_test(overrides=overrides) as instance:
        executor = k8s_job_executor.executor_creation_fn(InitExecutorContext(
            job=job, executor_def=k8s_job_executor, executor_config=config, instance=instance))
        run = create_run_for_test(instance, job_name=job_name,
                                  job_code_origin=job.get_python_origin())
        plan = create_execution_plan(job)
        context = PlanOrchestrationContext(
            plan_data=PlanData(job=job, dagster_run=run, instance=instance, execution_plan=plan,
                               raise_on_error=True, retry_mode=RetryMode.DISABLED),
            log_manager=create_context_free_log_manager(instance, run), executor=executor,
            output_capture=None)
        step = plan.steps[0]
        args = ExecuteStepArgs(job.get_python_origin(), run.run_id, [step.key],
                               instance_ref=instance.get_ref())
        list(executor._step_handler.launch_step(StepHandlerContext(  # noqa: SLF001
            instance=instance, plan_context=context, steps=[step], execute_step_args=args)))
    return step.key


def test_the_job_the_executor_sends_for_a_step_has_the_image_env_harness_volume_and_resources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        api_server: tuple[Path, list[tuple[str, dict]]]) -> None:
    kubeconfig, posted = api_server
    monkeypatch.setenv("SPECOPS_ROOT", str(tmp_path))  # what the run worker's pod has
    monkeypatch.delenv(SNAPSHOT_OF, raising=False)
    launcher = {**chart_run_launcher(load_yaml(VALUES)), "load_incluster_config": False,
                "kubeconfig_file": str(kubeconfig)}  # outside a cluster: the loopback server
    step = step_job("quick_delivery_job", load_yaml(RUN_CONFIG), launcher)
    [(path, job)] = posted
    assert path == "/apis/batch/v1/namespaces/specops/jobs"
    assert (job["kind"], job["metadata"]["labels"]["dagster/op"]) == ("Job", step)
    pod = job["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert container["image"] == "registry.example.com/specops-dag:0.1.0"
    assert container["args"] == ["dagster", "api", "execute_step"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert len(env) == len(container["env"])  # no variable twice
    assert (env["SPECOPS_ROOT"], env["DAGSTER_HOME"]) == ("/harness", "/opt/dagster/dagster_home")
    assert env["DAGSTER_PG_PASSWORD"] == {"secretKeyRef": {
        "key": "postgresql-password", "name": "dagster-postgresql-secret"}}
    assert container["envFrom"] == [{"secretRef": {"name": "specops-codex"}}]
    assert container["volumeMounts"] == [{"mountPath": "/harness", "name": "harness"}]
    assert pod["spec"]["volumes"] == [
        {"name": "harness", "persistentVolumeClaim": {"claimName": "specops-harness"}}]
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"},
                                      "limits": {"memory": "4Gi"}}
    assert pod["spec"]["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000,
                                              "fsGroup": 1000, "runAsNonRoot": True}
    assert pod["metadata"]["annotations"] == {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    from dagster._grpc.types import ExecuteStepArgs
    from dagster._serdes import deserialize_value

    args = deserialize_value(zlib.decompress(base64.b64decode(
        env["DAGSTER_COMPRESSED_EXECUTE_STEP_ARGS"])).decode(), ExecuteStepArgs)
    assert args.step_keys_to_execute == [step]  # the step pod loads the k8s location's file
    assert args.job_origin.repository_origin.code_pointer.python_file == str(K8S_DEFINITIONS)


# --- the Helm values ------------------------------------------------------------------------


def chart_key_problems(values_path: Path) -> list[str]:
    """Every key path of the values file that is not one of CHART_KEYS."""
    known = {key for keys in CHART_KEYS.values() for key in keys}
    problems: list[str] = []

    def walk(node: object, path: str) -> None:
        if path in OPAQUE:
            return
        if isinstance(node, list):
            for item in node:
                walk(item, f"{path}[]")
        elif isinstance(node, dict):
            for key, value in node.items():
                child = f"{path}.{key}" if path else str(key)
                if child not in known:
                    problems.append(f"{rel(values_path)}: `{child}` is not a key of the dagster "
                                    f"chart's values (from {CHART}); fix the key, or add it to "
                                    "CHART_KEYS in tests/dagster_adapter/test_k8s_config.py with "
                                    "the chart model that defines it")
                else:
                    walk(value, child)

    values = load_yaml(values_path)
    if not isinstance(values, dict):
        return [f"{rel(values_path)}: not a YAML mapping; Helm values are one"]
    walk(values, "")
    return problems


def test_every_key_of_the_helm_values_is_one_of_the_charts(tmp_path: Path) -> None:
    assert chart_key_problems(VALUES) == []
    planted = tmp_path / "values.yaml"
    planted.write_text(VALUES.read_text().replace("jobNamespace:", "jobNamespce:"))
    assert chart_key_problems(planted) == [
        f"{planted}: `runLauncher.config.k8sRunLauncher.jobNamespce` is not a key of the dagster "
        f"chart's values (from {CHART}); fix the key, or add it to CHART_KEYS in "
        "tests/dagster_adapter/test_k8s_config.py with the chart model that defines it"]


# --- the Dockerfile -------------------------------------------------------------------------


def instructions(text: str) -> list[tuple[str, list[str]]]:
    """(instruction, shell-split arguments) of a Dockerfile, continuations joined, comments out."""
    found, pending = [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            found.append((word.upper(), shlex.split(rest, comments=False)))
            pending = ""
    return found


@dataclass(frozen=True)
class Image:
    """What a Dockerfile sets: ARG defaults, ENV values, the FROM image, COPY argument lists
    (sources then destination, --flags left out), and its RUN commands."""

    args: dict[str, str]
    env: dict[str, str]
    base: str
    copies: list[list[str]]
    runs: list[str]

    def copied_to(self, *sources: str) -> str | None:
        """The destination of the COPY of exactly these sources."""
        return next((c[-1] for c in self.copies if c[:-1] == list(sources)), None)


def read_image(dockerfile: Path) -> Image:
    args: dict[str, str] = {}
    env: dict[str, str] = {}
    base, copies, runs = "", [], []
    for word, rest in instructions(dockerfile.read_text(encoding="utf-8")):
        if word == "ARG":
            args.update(a.split("=", 1) for a in rest if "=" in a)
        elif word == "ENV":
            env.update(a.split("=", 1) for a in rest)
        elif word == "FROM":
            base = rest[0]
        elif word == "COPY":
            copies.append([a for a in rest if not a.startswith("--")])
        elif word == "RUN":
            runs.append(" ".join(rest))
    return Image(args, env, base, copies, runs)


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether `.dockerignore` patterns leave `path` (or a folder above it) out of the context:
    the last pattern that matches decides, `!` keeps, `**` spans folders."""
    def regex(pattern: str) -> str:
        parts = re.split(r"(\*\*/?|\*|\?)", pattern.strip("/"))
        return "".join({"**/": "(.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(p, re.escape(p))
                       for p in parts)
    prefixes = [path.split("/")[:i] for i in range(1, path.count("/") + 2)]
    verdict = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        if any(re.fullmatch(regex(pattern.removeprefix("!")), "/".join(p)) for p in prefixes):
            verdict = not keep
    return verdict


def dockerfile_problems(dockerfile: Path, repo: Path = REPO) -> list[str]:
    """What in the Dockerfile disagrees with the repository's pins and paths."""
    image = read_image(dockerfile)
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    codex = json.loads((repo / "package.json").read_text())["dependencies"]["@openai/codex"]
    locked = json.loads((repo / "package-lock.json").read_text())["packages"][
        "node_modules/@openai/codex"]["version"]
    dagster = next(d.split("==")[1] for d in project["dependencies"] if d.startswith("dagster=="))
    where, problems = rel(dockerfile), []
    if image.args.get("CODEX_VERSION") != codex or codex != locked:
        problems.append(f"{where}: CODEX_VERSION is {image.args.get('CODEX_VERSION')}, "
                        f"package.json pins @openai/codex {codex} and package-lock.json locks "
                        f"{locked}; make them one version")
    if image.args.get("DAGSTER_VERSION") != dagster:
        problems.append(f"{where}: DAGSTER_VERSION is {image.args.get('DAGSTER_VERSION')}, "
                        f"pyproject.toml pins dagster=={dagster}; make them equal")
    python = re.fullmatch(r"python:(\d+)\.(\d+)-slim-bookworm", image.base)
    needed = tuple(int(n) for n in re.findall(r"\d+", project["requires-python"]))
    if not python or tuple(int(n) for n in python.groups()) < needed:
        problems.append(f"{where}: FROM {image.base} is not a python:X.Y-slim-bookworm image "
                        f"with X.Y {project['requires-python']} (pyproject's requires-python)")
    if not re.fullmatch(r"10\.\d+\.\d+", image.args.get("DOTNET_SDK_VERSION", "")):
        problems.append(f"{where}: DOTNET_SDK_VERSION {image.args.get('DOTNET_SDK_VERSION')} is "
                        "not an exact .NET 10 SDK version (10.x.y), the SDK this project "
                        "validates with")
    return problems + copy_problems(dockerfile, image, repo)


def copy_problems(dockerfile: Path, image: Image, repo: Path) -> list[str]:
    """COPY sources that are not in the repository or not in the build context, and files the
    wheel is built from that are not copied (so `pip install` of the copy would fail)."""
    ignore = dockerfile.parent / f"{dockerfile.name}.dockerignore"
    patterns = [p.strip() for p in (ignore.read_text().splitlines() if ignore.is_file() else [])
                if p.strip() and not p.startswith("#")]
    sources = [source for copy in image.copies for source in copy[:-1]]
    where, problems = rel(dockerfile), []
    for source in sources:
        if not (repo / source).exists():
            problems.append(f"{where}: COPY {source}: no such path in the repository; fix it")
        elif ignored(source, patterns):
            problems.append(f"{where}: COPY {source}: {ignore.name} leaves it out of the build "
                            "context; keep it in")
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
    wheel = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]
    for path in [*wheel["packages"], *wheel["force-include"], "pyproject.toml",
                 pyproject["project"]["readme"]]:
        if path not in sources:
            problems.append(f"{where}: `pip install` builds the wheel from what is copied, and "
                            f"{path} is not; COPY it")
    return problems


def image_env_problems(dockerfile: Path) -> list[str]:
    """The image's settings against the product's: the extras it installs, the caches where
    specops puts them for the harness root, the codex CLI where `npm ci` installed it."""
    image = read_image(dockerfile)
    env, where, problems = image.env, rel(dockerfile), []
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    installed = next((m for run in image.runs if (m := re.search(r"pip install .*?\[([\w,]+)\]", run))),
                     None)
    for extra in (installed.group(1).split(",") if installed else ["(no pip install .[…])"]):
        if extra not in extras:
            problems.append(f"{where}: installs the extra `{extra}`, which pyproject.toml does "
                            f"not define (it defines {', '.join(extras)})")
    caches = cache_dirs(Store(Path(env.get("SPECOPS_ROOT", "(unset)"))))
    for name, path in caches.items():
        if env.get(name) != str(path):
            problems.append(f"{where}: ENV {name}={env.get(name)}, but specops puts it at {path} "
                            f"for SPECOPS_ROOT={env.get('SPECOPS_ROOT')}; set it there")
    npm = image.copied_to("package.json", "package-lock.json") or ""
    if env.get("SPECOPS_CODEX_BIN") != f"{npm.rstrip('/')}/node_modules/.bin/codex":
        problems.append(f"{where}: SPECOPS_CODEX_BIN={env.get('SPECOPS_CODEX_BIN')} is not the "
                        f"codex that `npm ci` installs in {npm or '(no COPY of the lock file)'}")
    return problems


def test_the_dockerfile_matches_the_repositorys_pins_paths_and_caches() -> None:
    assert dockerfile_problems(DOCKERFILE) == []
    assert image_env_problems(DOCKERFILE) == []


def test_a_dockerfile_off_the_pins_is_refused_with_each_problem(tmp_path: Path) -> None:
    planted = tmp_path / "Dockerfile"
    planted.write_text(DOCKERFILE.read_text()
                       .replace("python:3.11-slim-bookworm", "python:3.10-slim-bookworm")
                       .replace("CODEX_VERSION=0.171.0", "CODEX_VERSION=0.170.0")
                       .replace("DOTNET_SDK_VERSION=10.0.401", "DOTNET_SDK_VERSION=9.0.300")
                       .replace("COPY workflow_defs ", "COPY workflow_def ")
                       .replace("/harness/.specops/cache/nuget-packages", "/nuget"))
    (tmp_path / "Dockerfile.dockerignore").write_text("specops_dag\n")
    where = str(planted)
    assert dockerfile_problems(planted) == [
        f"{where}: CODEX_VERSION is 0.170.0, package.json pins @openai/codex 0.171.0 and "
        "package-lock.json locks 0.171.0; make them one version",
        f"{where}: FROM python:3.10-slim-bookworm is not a python:X.Y-slim-bookworm image with "
        "X.Y >=3.11 (pyproject's requires-python)",
        f"{where}: DOTNET_SDK_VERSION 9.0.300 is not an exact .NET 10 SDK version (10.x.y), the "
        "SDK this project validates with",
        f"{where}: COPY specops_dag: Dockerfile.dockerignore leaves it out of the build "
        "context; keep it in",
        f"{where}: COPY workflow_def: no such path in the repository; fix it",
        f"{where}: `pip install` builds the wheel from what is copied, and workflow_defs is "
        "not; COPY it"]
    assert image_env_problems(planted) == [
        f"{where}: ENV NUGET_PACKAGES=/nuget, but specops puts it at "
        "/harness/.specops/cache/nuget-packages for SPECOPS_ROOT=/harness; set it there"]


# --- the three files together ---------------------------------------------------------------


def harness(entries: list[dict]) -> dict:
    """The entry named `harness` of a list of volumes or volume mounts ({} when none is)."""
    return next((entry for entry in entries if entry.get("name") == "harness"), {})


def agreement_problems(values_path: Path, run_config_path: Path, dockerfile: Path) -> list[str]:
    """Where the Helm values, the run config and the image disagree on what all pods share."""
    values, run = load_yaml(values_path), load_yaml(run_config_path)["execution"]["config"]
    image = read_image(dockerfile)
    [deployment] = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    uid = re.search(r"useradd --uid (\d+)", dockerfile.read_text()).group(1)  # type: ignore[union-attr]
    served = image.copied_to("deploy/k8s/definitions.py")
    pairs = [  # (what, (where, value) ...): every value must be the first one
        ("the image", ("values deployment", "{repository}:{tag}".format(**deployment["image"])),
         ("run config job_image", run.get("job_image"))),
        ("the namespace", ("values jobNamespace", launcher["jobNamespace"]),
         ("run config job_namespace", run["job_namespace"])),
        ("SPECOPS_ROOT", ("Dockerfile ENV", image.env.get("SPECOPS_ROOT")),
         ("values deployment env", {e["name"]: e["value"] for e in deployment["env"]}
          .get("SPECOPS_ROOT")),
         ("values envVars", dict(v.split("=", 1) for v in launcher["envVars"]).get("SPECOPS_ROOT")),
         ("run config env_vars", dict(v.split("=", 1) for v in run["env_vars"]).get("SPECOPS_ROOT")),
         *((f"{w} mountPath", harness(m).get("mountPath")) for w, m in (
             ("values deployment", deployment["volumeMounts"]),
             ("values launcher", launcher["volumeMounts"]), ("run config", run["volume_mounts"])))),
        ("the harness volume", ("values deployment", harness(deployment["volumes"])),
         ("values launcher", harness(launcher["volumes"])), ("run config", harness(run["volumes"]))),
        ("the codex Secret", ("values launcher", [s["name"] for s in launcher["envSecrets"]]),
         ("run config", run["env_secrets"])),
        ("DAGSTER_HOME", ("Dockerfile ENV", image.env.get("DAGSTER_HOME")),
         ("values global.dagsterHome", values["global"]["dagsterHome"])),
        ("the served file", ("Dockerfile COPY", served),
         ("values dagsterApiGrpcArgs", deployment["dagsterApiGrpcArgs"][-1])),
        ("the pods' user", ("Dockerfile useradd", int(uid)),
         *((f"{w} runAsUser", c["runAsUser"]) for w, c in (
             ("values deployment", deployment["podSecurityContext"]),
             ("values launcher", launcher["runK8sConfig"]["podSpecConfig"]["securityContext"]),
             ("run config", run["step_k8s_config"]["pod_spec_config"]["security_context"])))),
    ]
    return [f"{what}: {first[0]} says {first[1]!r} but {where} says {value!r}; make them the same"
            for what, first, *rest in pairs for where, value in rest if value != first[1]]


def test_the_helm_values_run_config_and_image_agree_on_what_every_pod_shares(
        tmp_path: Path) -> None:
    assert agreement_problems(VALUES, RUN_CONFIG, DOCKERFILE) == []
    planted = tmp_path / "run_config.yaml"
    planted.write_text(RUN_CONFIG.read_text().replace("specops-dag:0.1.0", "specops-dag:0.2.0")
                       .replace("claimName: specops-harness", "claimName: harness"))
    assert agreement_problems(VALUES, planted, DOCKERFILE) == [
        "the image: values deployment says 'registry.example.com/specops-dag:0.1.0' but run "
        "config job_image says 'registry.example.com/specops-dag:0.2.0'; make them the same",
        "the harness volume: values deployment says {'name': 'harness', 'persistentVolumeClaim': "
        "{'claimName': 'specops-harness'}} but run config says {'name': 'harness', "
        "'persistentVolumeClaim': {'claimName': 'harness'}}; make them the same"]


def test_the_kubernetes_page_says_plainly_that_none_of_this_runs_on_a_cluster_here() -> None:
    assert ("This configuration is checked by tests/dagster_adapter/test_k8s_config.py; it is "
            "not run on a cluster here.") in (REPO / "docs" / "kubernetes.md").read_text()
