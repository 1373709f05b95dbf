"""global.json as the .NET host reads it, and a port of the host's SDK matching rules
(dotnet/runtime `sdk_resolver.cpp`: `matches_policy`). The SDK silently ignores an invalid
global.json, so the product parses and checks it itself. Pure functions, no I/O beyond one read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

POLICIES = ("patch", "feature", "minor", "major", "latestpatch", "latestfeature",
            "latestminor", "latestmajor", "disable")
VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")
NET8 = re.compile(r"^8\.0\.\d{3}(-[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True)
class SdkPolicy:
    version: str
    roll_forward: str  # lower case, one of POLICIES
    allow_prerelease: bool


@dataclass(frozen=True)
class SdkVersion:
    major: int
    minor: int
    patch: int
    prerelease: str  # "" for a release

    def key(self) -> tuple:
        """Sort key: a release sorts after its prereleases (8.0.405-rc.1 < 8.0.405)."""
        return (self.major, self.minor, self.patch, self.prerelease == "", self.prerelease)

    @property
    def band(self) -> int:
        return self.patch // 100


def parse_version(text: str) -> SdkVersion | None:
    m = VERSION.match(text.strip())
    if not m:
        return None
    return SdkVersion(int(m[1]), int(m[2]), int(m[3]), m[4] or "")


def strip_comments(text: str) -> str:
    """Remove // and /* */ comments outside JSON strings (the host's reader allows them)."""
    out, i, in_str = [], 0, False
    while i < len(text):
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def check_global_json(path: Path) -> SdkPolicy | str:
    """The policy global.json asks for, or why it cannot select a .NET 8 SDK."""
    name = "global.json"
    if not path.is_file():
        return (f"{name} is missing at the repository root; add one that pins the .NET 8 SDK, "
                'e.g. {"sdk": {"version": "8.0.404", "rollForward": "latestPatch"}}')
    try:
        data = json.loads(strip_comments(path.read_text(encoding="utf-8-sig")))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"{name} is not valid JSON ({err}); the SDK would silently ignore it"
    sdk = data.get("sdk") if isinstance(data, dict) else None
    if not isinstance(sdk, dict):
        return f"{name} has no `sdk` object; add `\"sdk\": {{\"version\": \"8.0.xxx\"}}`"
    version = sdk.get("version")
    if not isinstance(version, str) or not NET8.match(version):
        return (f"{name}: sdk.version {version!r} is not a .NET 8 SDK version like 8.0.404 "
                "(x.y.znn, no wildcards)")
    roll = sdk.get("rollForward", "patch")
    if not isinstance(roll, str) or roll.lower() not in POLICIES:
        return (f"{name}: sdk.rollForward {roll!r} is unknown (known: patch, feature, minor, "
                "major, latestPatch, latestFeature, latestMinor, latestMajor, disable)")
    allow = sdk.get("allowPrerelease", True)
    if not isinstance(allow, bool):
        return f"{name}: sdk.allowPrerelease must be true or false, not {allow!r}"
    return SdkPolicy(version, roll.lower(), allow or "-" in version)


def matches_policy(policy: SdkPolicy, installed: SdkVersion) -> bool:
    """Whether the host would accept `installed` for `policy` (sdk_resolver::matches_policy)."""
    req = parse_version(policy.version)
    assert req is not None
    if installed.prerelease and not policy.allow_prerelease:
        return False
    if installed.key() < req.key():
        return False
    roll = policy.roll_forward
    if roll == "disable":
        return installed.key() == req.key()
    if roll in ("patch", "latestpatch"):
        return (installed.major, installed.minor, installed.band) == (req.major, req.minor,
                                                                      req.band)
    if roll in ("feature", "latestfeature"):
        return (installed.major, installed.minor) == (req.major, req.minor)
    if roll in ("minor", "latestminor"):
        return installed.major == req.major
    return True  # major, latestMajor


def sdk_satisfies(policy: SdkPolicy, reported: str) -> bool:
    """`dotnet --version` printed `reported`: is it a .NET 8 SDK the policy allows?"""
    installed = parse_version(reported)
    return (installed is not None and (installed.major, installed.minor) == (8, 0)
            and matches_policy(policy, installed))
