"""The Dagster UI in a real browser (Debian's Chromium driven by Playwright): the asset graph of
quick-delivery, a partition materialization launched from the UI, the node's metadata and checks
once the run succeeded, a run stopped at a gate, the nightly schedule and the `approve_gate`
Launchpad. The screenshots are kept in test-artifacts/; with SPECOPS_UPDATE_DOCS_IMAGES=1 the
documentation's ones are written to docs/images/ too."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from specops_dag.cli.demo import prepare_demo
from specops_dag.cli.ui import demo_replay_server
from specops_dag.dagster_adapter.automation import NIGHTLY
from specops_dag.dagster_adapter.instance import register_delivery
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.gates import approve
from specops_dag.delivery.store import Store
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.harness import REPO, VENV_BIN
from ..support.processes import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.ui]

ARTIFACTS = REPO / "test-artifacts"
DOC_IMAGES = REPO / "docs" / "images"
NODE_NAMES = 'foreignObject [class*="AssetNode_assetName"]'
# Scrolls the element's nearest scrolling ancestor, and nothing else, to put it a third down.
SCROLL_TO_THIRD = """row => {
  let pane = row.parentElement;
  while (pane && !(pane.scrollHeight > pane.clientHeight
                   && /auto|scroll/.test(getComputedStyle(pane).overflowY))) {
    pane = pane.parentElement;
  }
  const r = row.getBoundingClientRect(), p = pane.getBoundingClientRect();
  pane.scrollTop += r.top - p.top - p.height / 3;
}"""
GATED = "subtract-docs"  # a second delivery, its `target-write` gate never approved before a run
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


@pytest.fixture
def ui(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[tuple[str, Path, str, Path]]:
    """A demo harness root with a quick-delivery, the replay agent, and the webserver + daemon."""
    plan = prepare_demo(tmp_path / "demo", dotnet_available=False)
    home = Path(clean_env["DAGSTER_HOME"])
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    store = Store(plan.root)
    ops.new_delivery(store, load_catalog(definition_roots(plan.root), display_base=plan.root),
                     "quick-delivery", plan.delivery, "Document Calculator.Add.",
                     before_write=lambda: register_delivery(home, plan.delivery),
                     validation="docs-only")
    server = demo_replay_server(plan.root)  # the demo root's agent, as `specops ui` serves it
    assert server is not None, "a demo root plays its own scenario unless SPECOPS_REPLAY_URL is set"
    server.start()
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
        yield base, home, plan.delivery, plan.root
    finally:
        for proc in procs:  # ours, by process group: the code servers they started go too
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
        server.stop()


def finished_run(home: Path, delivery: str, limit_s: float = 240) -> dg.DagsterRun:
    """The latest run of the delivery's partition, once it has ended."""
    os.environ["DAGSTER_HOME"] = str(home)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with dg.DagsterInstance.get() as instance:
            runs = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": delivery}), limit=1)
            if runs and runs[0].is_finished:
                return runs[0]
        time.sleep(1)
    raise AssertionError(f"no finished run of `{delivery}` after {limit_s} s")


def shot(page: Page, name: str, doc: str | None = None, full_page: bool = False) -> None:
    """A screenshot in test-artifacts/; with SPECOPS_UPDATE_DOCS_IMAGES=1 also the docs' picture
    `docs/images/<doc>` (never otherwise, so a test run leaves the tree clean)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=full_page)
    if doc and os.environ.get("SPECOPS_UPDATE_DOCS_IMAGES") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / name, DOC_IMAGES / doc)


def settled(page: Page) -> None:
    """No spinner left on the page, then a moment for the last layout and transitions."""
    expect(page.locator(".spinnerGlobal")).to_have_count(0, timeout=60_000)
    page.wait_for_timeout(1500)


def launch_partition(page: Page, base: str, delivery: str) -> None:
    """Materialize every node of quick-delivery for one delivery from the group's graph."""
    page.goto(f"{base}/locations/specops/asset-groups/quick_delivery",
              wait_until="domcontentloaded")
    expect(page.locator(NODE_NAMES)).to_have_count(3, timeout=60_000)
    page.get_by_role("button", name="Materialize all…").click()
    dialog = page.locator('[role="dialog"]')
    dialog.get_by_text("Select a partition or create one").click()
    page.keyboard.type(delivery)
    page.get_by_role("menuitem", name=delivery).first.click()
    dialog.get_by_role("button", name="Launch 1 run").click()


def test_a_delivery_is_launched_and_inspected_from_the_dagster_ui(ui) -> None:
    base, home, delivery, root = ui
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/locations/specops/asset-groups/quick_delivery",
                  wait_until="domcontentloaded")
        nodes = page.locator(NODE_NAMES)
        expect(nodes).to_have_count(3, timeout=60_000)
        assert sorted(nodes.all_inner_texts()) == ["delivery", "develop", "verify"]
        shot(page, "ui-asset-graph.png")

        launch_partition(page, base, delivery)
        assert finished_run(home, delivery).status == dg.DagsterRunStatus.SUCCESS
        lineage(page, base)

        page.goto(f"{base}/assets/quick-delivery/develop?partition={delivery}",
                  wait_until="domcontentloaded")
        expect(page.get_by_text("handoffs", exact=True)).to_be_visible(timeout=60_000)
        for text in ("tokens_node", "codex_thread_id", "commit/metadata",
                     f"phases/{delivery}/develop/changes.md", "quick-delivery / verify"):
            # the lineage panel renders after the metadata: wait for each, do not read once
            expect(page.locator("body")).to_contain_text(text, timeout=30_000)
        shot(page, "ui-develop-metadata.png", full_page=True)
        page.get_by_role("tab", name="Checks").click()
        expect(page.get_by_text("validation", exact=True).first).to_be_visible(timeout=30_000)
        expect(page.get_by_text("handoff_current", exact=True).first).to_be_visible()
        shot(page, "ui-develop-checks.png", full_page=True)

        gated_run(page, base, home, root)
        schedule(page, base)
        launchpad(page, base, root)
        browser.close()


def lineage(page: Page, base: str) -> None:
    """The workflow's group once the delivery is materialized: each node's partition status."""
    page.goto(f"{base}/locations/specops/asset-groups/quick_delivery",
              wait_until="domcontentloaded")
    expect(page.locator(NODE_NAMES)).to_have_count(3, timeout=60_000)
    expect(page.get_by_text("100% filled")).to_have_count(3, timeout=60_000)
    settled(page)
    shot(page, "ui-delivery-lineage.png", "delivery-lineage.png")


def gated_run(page: Page, base: str, home: Path, root: Path) -> None:
    """A delivery whose `target-write` gate is not approved: the run is green, its page names
    the gate (tag, WARNING) and says how to approve it."""
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root),
                     "quick-delivery", GATED, "Document Calculator.Subtract.",
                     before_write=lambda: register_delivery(home, GATED), validation="docs-only")
    launch_partition(page, base, GATED)
    run = finished_run(home, GATED)
    assert (run.status, run.tags["specops/awaiting_gate"]) == (
        dg.DagsterRunStatus.SUCCESS, "target-write")
    message = (f"awaiting approval: gate `target-write` before `develop`; approve with "
               f"`specops approve {GATED} target-write` or the approve_gate job")
    with dg.DagsterInstance.get() as instance:
        assert [e.user_message for e in instance.all_logs(run.run_id)
                if e.dagster_event is None and e.level == logging.WARNING] == [message]
    # The log of the gated step only: its WARNING in view under the green run's header.
    page.goto(f"{base}/runs/{run.run_id}?logs=step:quick_delivery__develop",
              wait_until="domcontentloaded")
    warning_row = page.get_by_text(message)
    expect(warning_row).to_be_visible(timeout=60_000)
    settled(page)
    # The log follows a run's last event: scroll its pane (only) to show the WARNING near the top.
    warning_row.evaluate(SCROLL_TO_THIRD)
    expect(warning_row).to_be_in_viewport()
    page.get_by_role("button", name="View tags and config").click()
    dialog = page.locator('[role="dialog"]')
    expect(dialog).to_contain_text("specops/awaiting_gate", timeout=30_000)
    expect(dialog).to_contain_text("target-write")
    page.wait_for_timeout(1000)  # the dialog's opening transition
    shot(page, "ui-run-gated-tags.png")
    dialog.get_by_role("button", name="OK").click()
    expect(dialog).to_have_count(0, timeout=30_000)
    page.wait_for_timeout(1000)
    shot(page, "ui-run-gated.png", "run-gated.png")


def schedule(page: Page, base: str) -> None:
    """The nightly schedule's page says what it launches: Dagster shows the implicit asset job
    it targets as "None", so the description names it."""
    page.goto(f"{base}/locations/specops/schedules/nightly", wait_until="domcontentloaded")
    expect(page.get_by_text(NIGHTLY)).to_be_visible(timeout=60_000)
    settled(page)
    shot(page, "ui-schedule.png", "schedule.png")


def launchpad(page: Page, base: str, root: Path) -> None:
    """The `approve_gate` job's Launchpad, filled in, launched: the gate is approved."""
    config = (f"ops:\n  decide_gate:\n    config:\n      delivery: {GATED}\n"
              "      gate: target-write\n      decision: approved\n"
              "      note: plan reviewed in the UI\n")
    page.goto(f"{base}/locations/specops/jobs/approve_gate/playground/setup?"
              + urllib.parse.urlencode({"config": config}), wait_until="domcontentloaded")
    expect(page.locator("body")).to_contain_text("plan reviewed in the UI", timeout=60_000)
    expect(page.get_by_text("No errors")).to_be_visible(timeout=60_000)
    page.wait_for_timeout(1500)  # (the config actions below the fold keep a spinner going)
    shot(page, "ui-launchpad-approve-gate.png", "launchpad-approve-gate.png")
    page.get_by_role("button", name="Launch Run").click()
    deadline = time.monotonic() + 120
    while not [a for a in Store(root).read(GATED).approvals if a.gate == "target-write"]:
        assert time.monotonic() < deadline, "approve_gate did not record the approval"
        time.sleep(1)
    [approval] = Store(root).read(GATED).approvals
    assert (approval.decision, approval.note) == ("approved", "plan reviewed in the UI")
