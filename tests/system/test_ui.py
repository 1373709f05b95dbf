"""The Dagster UI in a real browser (Debian's Chromium driven by Playwright): the asset graph of
quick-delivery, a partition materialization launched from the UI, and the node's metadata and
checks once the run succeeded. The screenshots are kept in test-artifacts/."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import expect, sync_playwright

from specops_dag.cli.demo import prepare_demo, start_replay
from specops_dag.dagster_adapter.instance import register_delivery
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.gates import approve
from specops_dag.delivery.store import Store
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.harness import REPO, VENV_BIN
from ..support.processes import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.ui]

ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


@pytest.fixture
def ui(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[tuple[str, Path, str]]:
    """A demo harness root with a quick-delivery, the replay agent, and the webserver + daemon."""
    plan = prepare_demo(tmp_path / "demo", dotnet_available=False)
    home = Path(clean_env["DAGSTER_HOME"])
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    store = Store(plan.root)
    ops.new_delivery(store, load_catalog(definition_roots(plan.root), display_base=plan.root),
                     "quick-delivery", plan.delivery, "Document Calculator.Add.",
                     before_write=lambda: register_delivery(home, plan.delivery),
                     validation="docs-only")
    server = start_replay(plan)
    env = {**clean_env, "SPECOPS_ROOT": str(plan.root), "SPECOPS_REPLAY_URL": server.url}
    workspace = str(REPO / "workspace.yaml")
    # The launch must come from the UI, not from the approval sensor: stop it first.
    subprocess.run([str(VENV_BIN / "dagster"), "sensor", "stop", "gate_approvals", "-w",
                    workspace], env=env, cwd=plan.root, check=True, capture_output=True,
                   timeout=120)
    approve(store, plan.delivery, "target-write", note="ui test")
    port = free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = [subprocess.Popen(argv, env=env, cwd=plan.root, start_new_session=True,
                              stdout=open(logs / f"{name}.log", "w"), stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
             for name, argv in (
                 ("webserver", [str(VENV_BIN / "dagster-webserver"), "-w", workspace, "-h",
                                "127.0.0.1", "-p", str(port)]),
                 ("daemon", [str(VENV_BIN / "dagster-daemon"), "run", "-w", workspace]))]
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/server_info", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, (logs / "webserver.log").read_text()[-2000:]
                time.sleep(0.5)
        yield base, home, plan.delivery
    finally:
        for proc in procs:  # ours, by process group: the code servers they started go too
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
        server.stop()


def latest_run_status(home: Path, limit_s: float = 240) -> str:
    os.environ["DAGSTER_HOME"] = str(home)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with dg.DagsterInstance.get() as instance:
            runs = instance.get_runs(limit=1)
            if runs and runs[0].status.value in ("SUCCESS", "FAILURE", "CANCELED"):
                return runs[0].status.value
        time.sleep(1)
    return "TIMEOUT"


def test_a_delivery_is_launched_and_inspected_from_the_dagster_ui(ui) -> None:
    base, home, delivery = ui
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{base}/locations/specops/asset-groups/quick_delivery",
                  wait_until="domcontentloaded")
        nodes = page.locator('foreignObject [class*="AssetNode_assetName"]')
        expect(nodes).to_have_count(3, timeout=60_000)
        assert sorted(nodes.all_inner_texts()) == ["delivery", "develop", "verify"]
        page.screenshot(path=str(ARTIFACTS / "ui-asset-graph.png"))

        page.get_by_role("button", name="Materialize all…").click()
        dialog = page.locator('[role="dialog"]')
        dialog.get_by_text("Select a partition or create one").click()
        page.keyboard.type(delivery)
        page.get_by_role("menuitem", name=delivery).first.click()
        dialog.get_by_role("button", name="Launch 1 run").click()
        assert latest_run_status(home) == "SUCCESS"

        page.goto(f"{base}/assets/quick-delivery/develop?partition={delivery}",
                  wait_until="domcontentloaded")
        expect(page.get_by_text("handoffs", exact=True)).to_be_visible(timeout=60_000)
        for text in ("tokens_node", "codex_thread_id", "commit/metadata",
                     f"phases/{delivery}/develop/changes.md", "quick-delivery / verify"):
            # the lineage panel renders after the metadata: wait for each, do not read once
            expect(page.locator("body")).to_contain_text(text, timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "ui-develop-metadata.png"), full_page=True)
        page.get_by_role("tab", name="Checks").click()
        expect(page.get_by_text("validation", exact=True).first).to_be_visible(timeout=30_000)
        expect(page.get_by_text("handoff_current", exact=True).first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "ui-develop-checks.png"), full_page=True)
        browser.close()
