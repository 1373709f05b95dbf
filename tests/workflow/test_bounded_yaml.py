"""Definition reading is bounded (issue #8): an alias bomb, a document nested 20,000 levels deep
and a 2 MiB file each get one exact error line and exit 2 from `specops check` / `specops new`
(no hang, no traceback) and leave the tree byte-identical; the caps themselves sit exactly where
yamlfile's constants say, on the libyaml and the pure-Python parser alike."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from specops_dag.errors import DefinitionError
from specops_dag.workflow import yamlfile
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.harness import DIAMOND, VENV_BIN, tree_digest, write_files, write_tree

DONE = "error: 1 problem(s) in the definitions; nothing was changed\n"
LETTERS = "abcdefghij"
# 9 x's, then nine references to the previous list, ten times over: 9**10 (3.5 billion) leaves
BOMB = ("kind: phase\nid: p-bomb\na: &a [" + ",".join("x" * 9) + "]\n"
        + "".join(f"{b}: &{b} [{','.join([f'*{a}'] * 9)}]\n"
                  for a, b in zip(LETTERS, LETTERS[1:], strict=False)))
DEEP_FLOW = "kind: workflow\nid: deep\nnodes: " + "[" * 20_000 + "]" * 20_000 + "\n"
DEEP_BLOCK = "edges:\n" + "- " * 20_000 + "x\n"
BIG = "kind: phase\nid: p-big\n" + "# padding\n" * (2 * 1024 * 1024 // 10)

BOMB_ERR = ("YAML aliases expand to more than 100,000 nodes (an alias bomb?); write the values out "
            "or reference fewer aliases")
DEEP_ERR = "YAML nested more than 64 levels deep (mappings and sequences); flatten the structure"
BIG_ERR = ("larger than 1 MiB (1,048,576 bytes), the limit for a definition file; shorten it or "
           "remove it")
NODES_ERR = "more than 100,000 YAML nodes (values, lists and mappings); shorten the file"

CASES = {
    "alias-bomb": ("workflow_defs/phases/p-bomb.yaml", BOMB, BOMB_ERR),
    "nested-20000-flow-lists": ("workflow_defs/workflows/deep.yaml", DEEP_FLOW, DEEP_ERR),
    "nested-20000-block-lists": ("workflow_defs/skills/graph.yaml", DEEP_BLOCK, DEEP_ERR),
    "2-mib-file": ("workflow_defs/phases/p-big.yaml", BIG, BIG_ERR),
}


def test_the_alias_bomb_is_under_one_kilobyte() -> None:
    assert len(BOMB.encode()) < 1024
    assert len(BIG.encode()) >= 2 * 1024 * 1024


@pytest.fixture
def env(tmp_path: Path, clean_env: dict[str, str]) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    base = {k: v for k, v in clean_env.items() if not k.startswith("SPECOPS_")}
    return {**base, "HOME": str(tmp_path / "home")}


@pytest.mark.e2e
def capped(tmp_path: Path, env: dict[str, str], rel: str, body: str, *argv: str,
           ) -> tuple[subprocess.CompletedProcess, str]:
    """`specops ARGV` on the diamond harness with `body` at `rel`: (the result, the digest of
    the tree before it ran)."""
    root = write_tree(tmp_path / "harness", DIAMOND)
    write_files(root, {rel: body})
    before = tree_digest(tmp_path)
    result = subprocess.run([str(VENV_BIN / "specops"), "--root", str(root), *argv], env=env,
                            cwd=root, capture_output=True, stdin=subprocess.DEVNULL, text=True,
                            timeout=60)  # a bound on a hang, not a timing assertion
    return result, before


@pytest.mark.parametrize(("rel", "body", "error"), CASES.values(), ids=CASES.keys())
def test_a_file_over_a_cap_gets_its_exact_error_and_exit_2_and_changes_nothing(
        tmp_path: Path, env: dict[str, str], rel: str, body: str, error: str) -> None:
    result, before = capped(tmp_path, env, rel, body, "check")
    assert (result.returncode, result.stderr, result.stdout) == (
        2, f"{rel}: (file): {error}\n{DONE}", "")
    assert tree_digest(tmp_path) == before


# The same caps where `specops new diamond` reads them: in a file the workflow uses.
USED_BY_DIAMOND = {"workflow_defs/phases/p-bomb.yaml": "workflow_defs/phases/p-a.yaml",
                   "workflow_defs/phases/p-big.yaml": "workflow_defs/phases/p-a.yaml",
                   "workflow_defs/workflows/deep.yaml": "workflow_defs/workflows/diamond.yaml"}


@pytest.mark.parametrize(("rel", "body", "error"), CASES.values(), ids=CASES.keys())
def test_new_refuses_a_file_over_a_cap_that_its_workflow_uses_and_changes_nothing(
        tmp_path: Path, env: dict[str, str], rel: str, body: str, error: str) -> None:
    used = USED_BY_DIAMOND.get(rel, rel)
    result, before = capped(tmp_path, env, used, body, "new", "diamond", "d2", "--request", "x")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"{used}: (file): {error}\n")
    assert result.stderr.endswith(" problem(s) in the definitions; nothing was changed\n")
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize(("rel", "body"), [(rel, body) for rel, body, _ in CASES.values()
                                           if rel in USED_BY_DIAMOND])
def test_new_warns_of_a_file_over_a_cap_that_its_workflow_does_not_use(
        tmp_path: Path, env: dict[str, str], rel: str, body: str) -> None:
    result, _ = capped(tmp_path, env, rel, body, "new", "diamond", "d2", "--request", "x")
    assert (result.returncode, result.stderr) == (
        0, f"warning: 1 problem(s) in definitions `diamond` does not use ({rel}); `specops "
        "check` lists them\n")


@pytest.mark.parametrize(("rel", "body", "error"), CASES.values(), ids=CASES.keys())
def test_the_code_location_catalog_reports_the_same_single_problem(
        tmp_path: Path, rel: str, body: str, error: str) -> None:
    root = write_tree(tmp_path / "harness", DIAMOND)
    write_files(root, {rel: body})
    with pytest.raises(DefinitionError) as caught:
        load_catalog(definition_roots(root), display_base=root)
    assert caught.value.problems == [f"{rel}: (file): {error}"]


LOADERS = pytest.mark.parametrize("loader", [yamlfile.LOADER, yaml.SafeLoader],
                                  ids=["libyaml", "pure"])


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@LOADERS
@pytest.mark.parametrize("text", [nested(64), "a:\n" + "".join(
    f"{'  ' * i}k{i}:\n" for i in range(1, 63)) + "  " * 63 + "[x]\n"],
    ids=["flow", "block-and-flow"])
def test_64_levels_load_exactly_as_safe_load(loader: type, text: str) -> None:
    assert repr(yamlfile.safe_load(text, loader)) == repr(yaml.safe_load(text))


@LOADERS
@pytest.mark.parametrize("text", [
    nested(65), nested(1_001), nested(20_000), "- " * 65 + "x", "- " * 20_000 + "x",
    "k: " + "{a: " * 64 + "1" + "}" * 64,
    "a: &a [[[[1]]]]\nb: " + "[" * 60 + "*a" + "]" * 60,  # 1 + 60 + 4 levels once expanded
    "a: &a " + nested(64) + "\n",  # an anchor over the cap stops before its alias is seen
], ids=["flow-65", "flow-1001", "flow-20000", "block-65", "block-20000", "mapping-65",
        "alias-deepens-it", "anchored"])
def test_65_levels_or_more_raise_too_deep(loader: type, text: str) -> None:
    with pytest.raises(yamlfile.TooDeep) as caught:
        yamlfile.safe_load(text, loader)
    assert str(caught.value) == DEEP_ERR


def flat(nodes: int) -> str:
    """A sequence that, with itself, holds `nodes` nodes."""
    return "[" + ",".join(["1"] * (nodes - 1)) + "]"


@LOADERS
def test_100000_nodes_load_and_one_more_is_too_many(loader: type) -> None:
    assert len(yamlfile.safe_load(flat(100_000), loader)) == 99_999
    with pytest.raises(yamlfile.TooManyNodes) as caught:
        yamlfile.safe_load(flat(100_001), loader)
    assert str(caught.value) == NODES_ERR


@LOADERS
def test_aliases_count_every_node_they_stand_for_each_time_they_are_referenced(
        loader: type) -> None:
    # the top mapping, keys x and y, x's 9,000 nodes, y's sequence, 9,000 more per reference
    for refs, ok in ((10, True), (11, False)):  # 99,004 and 108,004 nodes
        text = f"x: &x {flat(9_000)}\ny: [{', '.join(['*x'] * refs)}]\n"
        total = 1 + 2 + 9_000 + 1 + refs * 9_000
        if ok:
            assert yamlfile.safe_load(text, loader) == yaml.safe_load(text)
            assert yamlfile.safe_load(text, loader, max_nodes=total)
            with pytest.raises(yamlfile.TooManyNodes):
                yamlfile.safe_load(text, loader, max_nodes=total - 1)
        else:
            with pytest.raises(yamlfile.TooManyNodes) as caught:
                yamlfile.safe_load(text, loader)
            assert str(caught.value) == BOMB_ERR


@LOADERS
@pytest.mark.parametrize("text", [BOMB, "<<: &m {a: 1}\n" + BOMB.split("\n", 2)[2]],
                         ids=["plain", "beside-a-merge-key"])
def test_the_alias_bomb_stops_at_the_cap_on_every_path(loader: type, text: str) -> None:
    with pytest.raises(yamlfile.TooManyNodes) as caught:
        yamlfile.safe_load(text, loader)
    assert str(caught.value) == BOMB_ERR


@pytest.mark.parametrize("text", [
    "a: &x [1, {k: v}]\nb: *x\nc: [*x, *x]\n",
    "a: &s 3\nb: *s\n",
    "&a [*a]\n",
    "a: &x {k: 1}\nb: {<<: *x, j: 2}\n",
], ids=["shared-collections", "shared-scalar", "self-containing", "merge-key"])
def test_aliases_are_shared_as_safe_load_shares_them(text: str) -> None:
    got, expected = yamlfile.safe_load(text), yaml.safe_load(text)
    assert repr(got) == repr(expected)
    if isinstance(expected, dict) and "c" in expected:
        assert got["a"] is got["b"] is got["c"][0] is got["c"][1]


@pytest.mark.parametrize("text, error", [
    ("a: &x 1\nb: &x 2\n", yaml.composer.ComposerError),
    ("a: *nowhere\n", yaml.composer.ComposerError),
], ids=["duplicate anchor", "undefined alias"])
def test_an_anchor_error_raises_the_yaml_error_safe_load_raises(
        text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        yaml.safe_load(text)
    for loader in (yamlfile.LOADER, yaml.SafeLoader):
        with pytest.raises(error):
            yamlfile.safe_load(text, loader)


@pytest.mark.parametrize("body", [b"a: 1\r\nb: |\r\n  x\r\n  y\r\n", b"a: 1\rb: 2\r", b"k: v\n"],
                         ids=["crlf", "cr", "lf"])
def test_read_text_reads_as_path_read_text(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(body)
    assert yamlfile.read_text(path) == path.read_text(encoding="utf-8")


def test_read_text_stops_one_byte_past_the_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"x" * 100)
    assert yamlfile.read_text(path, limit=100) == "x" * 100
    with pytest.raises(yamlfile.TooLarge) as caught:
        yamlfile.read_text(path, limit=99)
    assert str(caught.value) == ("larger than 99 bytes, the limit for a definition file; shorten "
                                 "it or remove it")
