"""global.json as the .NET host reads it, a port of the host's SDK matching rules
(dotnet/runtime `sdk_resolver.cpp`: `matches_policy`), and the target policy (issue 42): which
framework a repository is validated as and which SDKs may build it. The host silently ignores an
invalid global.json, so the product parses and checks it itself. Pure functions, no I/O beyond
one read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

POLICIES = ("patch", "feature", "minor", "major", "latestpatch", "latestfeature",
            "latestminor", "latestmajor", "disable")
VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")
SDK_VERSION = re.compile(r"^\d+\.\d+\.\d{3}(-[0-9A-Za-z.-]+)?$")  # x.y.znn: a band and a patch
# The supported targets: each framework and the SDK/runtime line (major, minor) it is built with.
FRAMEWORKS = {"net8.0": (8, 0), "net10.0": (10, 0)}
LTS = "net10.0"  # `auto` without a pinned SDK version


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


def an_sdk(line: str) -> str:
    """"an 8.0 SDK", "a 10.0 SDK": the SDK line `line` (major.minor) with its article."""
    return ("an " if line.startswith(("8", "11", "18")) else "a ") + f"{line} SDK"


def example_pin(framework: str) -> str:
    """A global.json that pins the SDK line of `framework` (one the host and the policy accept)."""
    major, minor = FRAMEWORKS[framework]
    return f'{{"sdk": {{"version": "{major}.{minor}.100", "rollForward": "latestFeature"}}}}'


def check_global_json(path: Path, example: str = LTS, pin_required: bool = True
                      ) -> SdkPolicy | str | None:
    """The SDK policy global.json asks for, or why the host would ignore it or (`pin_required`)
    it pins nothing; None: a valid file without an `sdk` object, when no pin is required."""
    name = "global.json"
    if not path.is_file():
        return (f"{name} is missing at the repository root; add one that pins the SDK, "
                f"e.g. {example_pin(example)}")
    try:
        data = json.loads(strip_comments(path.read_text(encoding="utf-8-sig")))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"{name} is not valid JSON ({err}); the SDK would silently ignore it"
    sdk = data.get("sdk") if isinstance(data, dict) else None
    if sdk is None and isinstance(data, dict) and not pin_required:
        return None
    if not isinstance(sdk, dict):
        return f"{name} has no `sdk` object; add one, e.g. {example_pin(example)}"
    version = sdk.get("version")
    if not isinstance(version, str) or not SDK_VERSION.match(version):
        return (f"{name}: sdk.version {version!r} is not an SDK version like 10.0.100 "
                "(x.y.znn, no wildcards); the SDK would silently ignore the file")
    roll = sdk.get("rollForward", "patch")
    if not isinstance(roll, str) or roll.lower() not in POLICIES:
        return (f"{name}: sdk.rollForward {roll!r} is unknown (known: patch, feature, minor, "
                "major, latestPatch, latestFeature, latestMinor, latestMajor, disable); the "
                "SDK would silently ignore the file")
    allow = sdk.get("allowPrerelease", True)
    if not isinstance(allow, bool):
        return (f"{name}: sdk.allowPrerelease must be true or false, not {allow!r}; the SDK "
                "would silently ignore the file")
    return SdkPolicy(version, roll.lower(), allow or "-" in version)


RUNNERS = {"vstest": "vstest", "microsoft.testing.platform": "mtp"}  # the SDK's, any case


def test_runner(path: Path) -> str:
    """The mode of `dotnet test` global.json's `test.runner` selects from SDK 10 on: "vstest"
    (also without the file or the key) or "mtp". Raises ValueError with the fix for a value
    the SDK refuses (it then fails every command in the folder, `dotnet --version` too)."""
    if not path.is_file():
        return "vstest"
    try:
        data = json.loads(strip_comments(path.read_text(encoding="utf-8-sig")))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "vstest"  # check_global_json names the broken file
    test = data.get("test") if isinstance(data, dict) else None
    runner = test.get("runner") if isinstance(test, dict) else None
    if runner is None:
        return "vstest"
    if not isinstance(runner, str) or runner.lower() not in RUNNERS:
        raise ValueError(f"global.json: test.runner {runner!r} is not a test runner the SDK "
                         "knows (VSTest, Microsoft.Testing.Platform); the .NET 10 SDK fails "
                         "every command in the repository on it: use one of those or remove "
                         "the key")
    return RUNNERS[runner.lower()]


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


@dataclass(frozen=True)
class TargetPolicy:
    """The framework every project must target and the SDK and runtime that may build and test
    it; `origin` says where the framework came from (for messages)."""

    framework: str  # a key of FRAMEWORKS
    newer_sdk: bool
    newer_runtime: bool
    origin: str

    @property
    def line(self) -> tuple[int, int]:
        return FRAMEWORKS[self.framework]

    @property
    def line_text(self) -> str:
        return "{}.{}".format(*self.line)

    def describe(self) -> str:
        sdk = an_sdk(self.line_text) + (" or newer" if self.newer_sdk else " only")
        return f"{self.framework}: {sdk} ({self.origin})"

    def allows_sdk(self, reported: str) -> bool:
        """`dotnet --version` printed `reported`: may it build this target?"""
        found = parse_version(reported)
        if found is None:
            return False
        line = (found.major, found.minor)
        return line == self.line or (self.newer_sdk and line > self.line)


def resolve_target(framework: str, newer_sdk: bool, newer_runtime: bool,
                   global_json: Path, origin: str = "") -> TargetPolicy | str:
    """`validation.target` made concrete: `auto` takes the SDK line global.json's sdk.version
    pins. A string is why it cannot be resolved (a pinned line that is no supported target)."""
    if framework != "auto":
        return TargetPolicy(framework, newer_sdk, newer_runtime,
                            origin or "validation.target.framework")
    pinned = check_global_json(global_json)
    if not isinstance(pinned, SdkPolicy):
        return TargetPolicy(LTS, newer_sdk, newer_runtime,
                            "auto: no global.json pins an SDK version, so the current LTS")
    found = parse_version(pinned.version)
    assert found is not None  # check_global_json matched SDK_VERSION
    for name, line in FRAMEWORKS.items():
        if (found.major, found.minor) == line:
            return TargetPolicy(name, newer_sdk, newer_runtime,
                                f"auto: global.json pins SDK {pinned.version}")
    known = ", ".join(f"{name} ({an_sdk(f'{a}.{b}')})" for name, (a, b) in FRAMEWORKS.items())
    return (f"global.json pins SDK {pinned.version}, which is no supported .NET target "
            f"(supported: {known}); pin one of those lines in global.json, or set "
            "`validation.target.framework` in workflow_defs/validation.yaml")
