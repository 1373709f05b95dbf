from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.validation.sdk import SdkPolicy, check_global_json, parse_version, sdk_satisfies


def policy(version: str, roll: str, pre: bool = True) -> SdkPolicy:
    return SdkPolicy(version, roll.lower(), pre)


@pytest.mark.parametrize(("roll", "installed", "ok"), [
    ("disable", "8.0.404", True), ("disable", "8.0.405", False),
    ("patch", "8.0.410", True), ("patch", "8.0.403", False), ("patch", "8.0.500", False),
    ("latestPatch", "8.0.499", True), ("latestPatch", "8.0.500", False),
    ("feature", "8.0.500", True), ("feature", "8.0.399", False),
    ("latestFeature", "8.0.999", True),
    ("minor", "8.1.100", False),  # not .NET 8.0 any more: refused by the .NET 8 rule
    ("latestMajor", "9.0.100", False), ("latestMajor", "8.0.405", True),
    ("patch", "8.0.405-rc.1", True),
])
def test_the_sdk_policy_follows_the_hosts_matching_rules(roll: str, installed: str,
                                                         ok: bool) -> None:
    assert sdk_satisfies(policy("8.0.404", roll), installed) is ok


def test_a_prerelease_sdk_needs_allow_prerelease() -> None:
    assert sdk_satisfies(policy("8.0.404", "patch", pre=False), "8.0.405-rc.1") is False
    assert parse_version("8.0.405-rc.1").key() < parse_version("8.0.405").key()  # type: ignore


GLOBAL_JSON = [
    pytest.param(None, "global.json is missing at the repository root; add one that pins the "
                 '.NET 8 SDK, e.g. {"sdk": {"version": "8.0.404", "rollForward": "latestPatch"}}',
                 id="missing"),
    pytest.param('{"sdk": {"version": "8.0"}}', "global.json: sdk.version '8.0' is not a .NET 8 "
                 "SDK version like 8.0.404 (x.y.znn, no wildcards)", id="short-version"),
    pytest.param('{"sdk": {"version": "9.0.100"}}', "global.json: sdk.version '9.0.100' is not "
                 "a .NET 8 SDK version like 8.0.404 (x.y.znn, no wildcards)", id="net9"),
    pytest.param('{"sdk": {"version": "8.0.404", "rollForward": "sideways"}}',
                 "global.json: sdk.rollForward 'sideways' is unknown (known: patch, feature, "
                 "minor, major, latestPatch, latestFeature, latestMinor, latestMajor, disable)",
                 id="unknown-policy"),
    pytest.param('{"sdk": {"version": "8.0.404",}', "global.json is not valid JSON (Expecting "
                 "property name enclosed in double quotes: line 1 column 31 (char 30)); the SDK "
                 "would silently ignore it", id="bad-json"),
    pytest.param('{"tools": {}}', 'global.json has no `sdk` object; add `"sdk": {"version": '
                 '"8.0.xxx"}`', id="no-sdk"),
]


@pytest.mark.parametrize(("text", "message"), GLOBAL_JSON)
def test_an_unusable_global_json_is_reported_not_ignored(tmp_path: Path, text: str | None,
                                                         message: str) -> None:
    if text is not None:
        (tmp_path / "global.json").write_text(text)
    assert check_global_json(tmp_path / "global.json") == message


def test_global_json_may_carry_comments_and_defaults_to_patch(tmp_path: Path) -> None:
    (tmp_path / "global.json").write_text(
        '// pinned\n{\n  /* the SDK */ "sdk": {"version": "8.0.404", // exact band\n'
        '  "url": "http://x//y"}\n}\n')
    assert check_global_json(tmp_path / "global.json") == SdkPolicy("8.0.404", "patch", True)
