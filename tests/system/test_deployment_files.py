"""compose and Kubernetes files: validated by real tools, and in step with the shared template."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deploy.nginx.render import render

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
