"""The documentation's pictures of the Dagster UI are in the tree, so a picture the README or
docs/ shows cannot silently vanish. They are made by tests/system/test_ui.py (the real webserver
in Chromium) when it runs with SPECOPS_UPDATE_DOCS_IMAGES=1."""

from __future__ import annotations

import struct

import pytest

from ..support.harness import REPO

IMAGES = REPO / "docs" / "images"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["delivery-lineage.png", "run-gated.png", "schedule.png",
                                  "launchpad-approve-gate.png"])
def test_each_ui_picture_of_the_docs_is_a_png_of_a_readable_size(name: str) -> None:
    data = (IMAGES / name).read_bytes()
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"  # the first chunk, which holds the size
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 800 and height >= 500, (width, height)
