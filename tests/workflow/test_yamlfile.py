"""The catalog's YAML loader returns exactly what `yaml.safe_load` returns."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from specops_dag.workflow import yamlfile

from ..support.harness import REPO

DOCUMENTS = {
    "plain mapping": "kind: phase\nid: p\nexecution: {goal: Do it., skills: [a, b]}\n",
    "core scalars": ("i: [0x1f, 0o17, 1_000, -3, +4, 1:30]\nf: [1e3, 1_0.5, -.5]\n"
                     "b: [yes, No, on, OFF, true]\nn: [~, null, ]\ns: ['3', \"x\", !!str 12]\n"),
    "shared alias": "a: &x [1, 2]\nb: *x\n",
    "merge key": "a: &x {k: 1}\nb: {<<: *x, j: 2}\n",
    "self-containing alias": "&a [*a]\n",
    "timestamp": "t: 2001-12-14\n",
    "binary": "b: !!binary aGVsbG8=\n",
    "duplicate key": "{a: 1, a: 2}\n",
    "empty": "",
    "comment only": "# nothing\n",
    "block text": "goal: |\n  line one\n  line two\n",
}


@pytest.mark.parametrize("text", DOCUMENTS.values(), ids=DOCUMENTS.keys())
def test_a_document_loads_exactly_as_yaml_safe_load_loads_it(text: str) -> None:
    expected, got = yaml.safe_load(text), yamlfile.safe_load(text)
    assert repr(got) == repr(expected)
    assert type(got) is type(expected)


def test_infinities_and_nan_load_as_floats() -> None:
    got = yamlfile.safe_load("f: [.inf, -.Inf, .nan]\n")["f"]
    assert got[:2] == [math.inf, -math.inf] and math.isnan(got[2])


@pytest.mark.parametrize("text, error", [
    ("? [1]\n: x\n", yaml.constructor.ConstructorError),
    ("!foo x\n", yaml.constructor.ConstructorError),
    ("a: 1\n---\nb: 2\n", yaml.composer.ComposerError),
    ("a: [1\n", yaml.parser.ParserError),
], ids=["unhashable key", "unknown tag", "two documents", "unclosed flow sequence"])
def test_a_broken_document_raises_the_yaml_error_safe_load_raises(
        text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        yaml.safe_load(text)
    with pytest.raises(error):
        yamlfile.safe_load(text)


def test_every_yaml_file_in_the_repository_loads_as_with_safe_load() -> None:
    files = [p for p in REPO.rglob("*.y*ml") if not {".venv", "node_modules", ".git"} &
             set(p.relative_to(REPO).parts)]
    assert len(files) > 20
    for path in files:
        text = Path(path).read_text(encoding="utf-8")
        assert yamlfile.safe_load(text) == yaml.safe_load(text), path
