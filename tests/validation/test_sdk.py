from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.validation.sdk import (
    SdkPolicy,
    TargetPolicy,
    check_global_json,
    matches_policy,
    parse_version,
    resolve_target,
)


def policy(version: str, roll: str, pre: bool = True) -> SdkPolicy:
    return SdkPolicy(version, roll.lower(), pre)


def matches(pin: SdkPolicy, installed: str) -> bool:
    found = parse_version(installed)
    assert found is not None
    return matches_policy(pin, found)


@pytest.mark.parametrize(("roll", "installed", "ok"), [
    ("disable", "8.0.404", True), ("disable", "8.0.405", False),
    ("patch", "8.0.410", True), ("patch", "8.0.403", False), ("patch", "8.0.500", False),
    ("latestPatch", "8.0.499", True), ("latestPatch", "8.0.500", False),
    ("feature", "8.0.500", True), ("feature", "8.0.399", False),
    ("latestFeature", "8.0.999", True), ("latestFeature", "10.0.100", False),
    ("minor", "8.1.100", True), ("minor", "10.0.100", False),
    ("latestMajor", "10.0.401", True), ("latestMajor", "8.0.403", False),
    ("patch", "8.0.405-rc.1", True),
])
def test_global_json_matches_sdks_as_the_host_does(roll: str, installed: str, ok: bool) -> None:
    assert matches(policy("8.0.404", roll), installed) is ok


def test_a_prerelease_sdk_needs_allow_prerelease() -> None:
    assert matches(policy("8.0.404", "patch", pre=False), "8.0.405-rc.1") is False
    assert parse_version("8.0.405-rc.1").key() < parse_version("8.0.405").key()  # type: ignore


@pytest.mark.parametrize(("framework", "newer", "installed", "ok"), [
    ("net8.0", True, "8.0.404", True), ("net8.0", True, "10.0.401", True),
    ("net8.0", False, "10.0.401", False), ("net8.0", False, "8.0.100", True),
    ("net10.0", True, "8.0.404", False), ("net10.0", False, "10.0.100", True),
    ("net10.0", True, "11.0.100", True), ("net10.0", False, "11.0.100", False),
    ("net10.0", True, "not a version", False),
])
def test_the_target_policy_allows_its_own_sdk_line_and_newer_ones_where_it_says_so(
        framework: str, newer: bool, installed: str, ok: bool) -> None:
    assert TargetPolicy(framework, newer, True, "test").allows_sdk(installed) is ok


@pytest.mark.parametrize(("text", "framework", "origin"), [
    ('{"sdk": {"version": "8.0.100", "rollForward": "latestMajor"}}', "net8.0",
     "auto: global.json pins SDK 8.0.100"),
    ('{"sdk": {"version": "10.0.100"}}', "net10.0", "auto: global.json pins SDK 10.0.100"),
    (None, "net10.0", "auto: no global.json pins an SDK version, so the current LTS"),
    ('{"test": {"runner": "Microsoft.Testing.Platform"}}', "net10.0",
     "auto: no global.json pins an SDK version, so the current LTS"),
])
def test_an_auto_target_takes_the_sdk_line_global_json_pins(tmp_path: Path, text: str | None,
                                                            framework: str, origin: str) -> None:
    if text is not None:
        (tmp_path / "global.json").write_text(text)
    assert resolve_target("auto", True, False, tmp_path / "global.json") == TargetPolicy(
        framework, True, False, origin)


def test_a_named_target_ignores_global_json(tmp_path: Path) -> None:
    (tmp_path / "global.json").write_text('{"sdk": {"version": "10.0.100"}}')
    policy_ = resolve_target("net8.0", False, True, tmp_path / "global.json")
    assert policy_ == TargetPolicy("net8.0", False, True, "validation.target.framework")
    assert policy_.describe() == "net8.0: an 8.0 SDK only (validation.target.framework)"


def test_an_auto_target_refuses_a_pinned_line_that_is_no_supported_target(tmp_path: Path) -> None:
    (tmp_path / "global.json").write_text('{"sdk": {"version": "9.0.100"}}')
    assert resolve_target("auto", True, True, tmp_path / "global.json") == (
        "global.json pins SDK 9.0.100, which is no supported .NET target (supported: net8.0 "
        "(an 8.0 SDK), net10.0 (a 10.0 SDK)); pin one of those lines in global.json, or set "
        "`validation.target.framework` in workflow_defs/validation.yaml")


IGNORED = "the SDK would silently ignore the file"
GLOBAL_JSON = [
    pytest.param(None, "global.json is missing at the repository root; add one that pins the "
                 'SDK, e.g. {"sdk": {"version": "10.0.100", "rollForward": "latestFeature"}}',
                 id="missing"),
    pytest.param('{"sdk": {"version": "8.0"}}', "global.json: sdk.version '8.0' is not an SDK "
                 f"version like 10.0.100 (x.y.znn, no wildcards); {IGNORED}", id="short-version"),
    pytest.param('{"sdk": {"version": "10.0.*"}}', "global.json: sdk.version '10.0.*' is not an "
                 f"SDK version like 10.0.100 (x.y.znn, no wildcards); {IGNORED}", id="wildcard"),
    pytest.param('{"sdk": {"version": "8.0.404", "rollForward": "sideways"}}',
                 "global.json: sdk.rollForward 'sideways' is unknown (known: patch, feature, "
                 "minor, major, latestPatch, latestFeature, latestMinor, latestMajor, disable); "
                 f"{IGNORED}", id="unknown-policy"),
    pytest.param('{"sdk": {"version": "8.0.404", "allowPrerelease": "yes"}}',
                 "global.json: sdk.allowPrerelease must be true or false, not 'yes'; "
                 f"{IGNORED}", id="prerelease-not-bool"),
    pytest.param('{"sdk": {"version": "8.0.404",}', "global.json is not valid JSON (Expecting "
                 "property name enclosed in double quotes: line 1 column 31 (char 30)); the SDK "
                 "would silently ignore it", id="bad-json"),
    pytest.param('{"tools": {}}', 'global.json has no `sdk` object; add one, e.g. {"sdk": '
                 '{"version": "10.0.100", "rollForward": "latestFeature"}}', id="no-sdk"),
]


@pytest.mark.parametrize(("text", "message"), GLOBAL_JSON)
def test_an_unusable_global_json_is_reported_not_ignored(tmp_path: Path, text: str | None,
                                                         message: str) -> None:
    if text is not None:
        (tmp_path / "global.json").write_text(text)
    assert check_global_json(tmp_path / "global.json") == message


def test_a_global_json_without_an_sdk_pin_is_accepted_when_no_pin_is_required(
        tmp_path: Path) -> None:
    (tmp_path / "global.json").write_text('{"test": {"runner": "Microsoft.Testing.Platform"}}')
    assert check_global_json(tmp_path / "global.json", pin_required=False) is None


def test_global_json_may_carry_comments_and_defaults_to_patch(tmp_path: Path) -> None:
    (tmp_path / "global.json").write_text(
        '// pinned\n{\n  /* the SDK */ "sdk": {"version": "8.0.404", // exact band\n'
        '  "url": "http://x//y"}\n}\n')
    assert check_global_json(tmp_path / "global.json") == SdkPolicy("8.0.404", "patch", True)
