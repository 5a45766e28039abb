"""compose and Kubernetes files: validated by real tools, and in step with the shared template."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.settings import Settings
from deploy.nginx.render import render
from tests.system.test_small_box import BOX_MEMORY_BYTES

pytestmark = pytest.mark.system
ROOT = Path(__file__).resolve().parents[2]


def test_the_compose_gateway_config_is_the_rendered_template() -> None:
    expected = render(["posenc:8000"], "8080", "/tmp")
    assert (ROOT / "deploy/nginx/compose.conf").read_text() == expected


def test_the_kubernetes_gateway_config_is_the_rendered_template() -> None:
    documents = list(yaml.safe_load_all((ROOT / "deploy/k8s/gateway.yaml").read_text()))
    config = next(d for d in documents if d["kind"] == "ConfigMap")["data"]["nginx.conf"]
    expected = render(["posenc.posenc.svc.cluster.local:8000"], "8080", "/tmp/nginx")
    assert config.strip() == expected.strip()


def test_compose_validates_with_a_real_compose() -> None:
    compose = shutil.which("docker-compose")
    assert compose is not None, "make test installs Debian's docker-compose"
    result = subprocess.run(
        [compose, "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert services["posenc"]["deploy"]["replicas"] == 2
    assert "8080" in str(services["gateway"]["ports"])


def test_kubernetes_manifests_validate_against_the_schemas() -> None:
    tool = Path(sys.executable).with_name("kubernetes-validate")
    manifests = sorted(str(p) for p in (ROOT / "deploy/k8s").glob("*.yaml"))
    result = subprocess.run([str(tool), "--strict", *manifests], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("passed") == 7  # 7 resources in 3 files


# ---- the deployment agrees with the service's own limits (app/settings.py's defaults) ----

SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}
TIME_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "": 1}
BUDGET_VARIABLES = ("POSENC_MEMORY_BYTES", "POSENC_CACHE_BYTES")


def _default(name: str) -> Any:
    return Settings.model_fields[name].get_default(call_default_factory=True)


def _directive(config: str, name: str) -> str:
    found = re.findall(rf"^\s*{name}\s+([^;]+);", config, flags=re.MULTILINE)
    assert len(found) == 1, f"{name}: {found}"
    return str(found[0]).strip()


def _nginx_configs() -> list[str]:
    documents = list(yaml.safe_load_all((ROOT / "deploy/k8s/gateway.yaml").read_text()))
    kubernetes = next(d for d in documents if d["kind"] == "ConfigMap")["data"]["nginx.conf"]
    return [(ROOT / "deploy/nginx/compose.conf").read_text(), kubernetes]


@pytest.mark.parametrize("config", _nginx_configs(), ids=["compose", "kubernetes"])
def test_the_gateway_takes_bodies_exactly_as_large_as_the_service(config: str) -> None:
    number, unit = re.fullmatch(
        r"(\d+)([kmg]?)", _directive(config, "client_max_body_size")
    ).groups()  # type: ignore[union-attr]
    assert int(number) * SIZE_UNITS[unit] == _default("max_body_bytes")


@pytest.mark.parametrize("config", _nginx_configs(), ids=["compose", "kubernetes"])
@pytest.mark.parametrize("directive", ["proxy_read_timeout", "proxy_send_timeout"])
def test_the_gateway_waits_longer_than_the_service_computes(config: str, directive: str) -> None:
    # Shorter, and nginx would answer 504 where the service's own 503 (with its problem type)
    # was on its way.
    number, unit = re.fullmatch(r"(\d+)(ms|s|m|h|)", _directive(config, directive)).groups()  # type: ignore[union-attr]
    assert int(number) * TIME_UNITS[unit] > _default("request_timeout_s")


def _image_environment() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    pairs = [p for line in text.splitlines() if line.startswith("ENV ") for p in line.split()[1:]]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_image_makes_glibc_give_freed_arrays_back() -> None:
    environment = _image_environment()
    assert environment["MALLOC_ARENA_MAX"] == "2"
    assert environment["MALLOC_MMAP_THRESHOLD_"] == "131072"


def _deployments() -> dict[str, tuple[dict[str, str], int]]:
    """Per deployment: the environment it gives posenc, and its memory limit in bytes."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["posenc"]
    number, unit = re.fullmatch(r"(\d+)([kmg])", compose["mem_limit"]).groups()  # type: ignore[union-attr]
    documents = yaml.safe_load_all((ROOT / "deploy/k8s/posenc.yaml").read_text())
    pod = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    k8s_memory = container["resources"]["limits"]["memory"]
    k8s_number, k8s_unit = re.fullmatch(r"(\d+)(Mi|Gi)", k8s_memory).groups()  # type: ignore[union-attr]
    return {
        "compose": (
            {k: str(v) for k, v in compose["environment"].items()},
            int(number) * SIZE_UNITS[unit],
        ),
        "kubernetes": (
            {e["name"]: e["value"] for e in container["env"]},
            int(k8s_number) * {"Mi": 2**20, "Gi": 2**30}[k8s_unit],
        ),
    }


@pytest.mark.parametrize("name", ["compose", "kubernetes"])
def test_every_deployment_leaves_the_budget_to_its_memory_limit(name: str) -> None:
    # The budget's default is derived from the container's limit, per process: so the files set
    # a limit, no budget of their own, one worker, and no less memory than the proven box.
    environment, memory_limit = _deployments()[name]
    merged = {**_image_environment(), **environment}
    assert not set(BUDGET_VARIABLES) & set(merged), merged
    assert merged["POSENC_WORKERS"] == "1"
    assert memory_limit >= BOX_MEMORY_BYTES
