#!/usr/bin/env python3
"""The manifest tells the truth: every Swift target imports exactly the modules Package.swift
declares for it (a declared module nothing imports, or an import of a module the target does not
declare, is a finding), apart from the toolchain's own modules; and ARCHITECTURE.md's module
table is the one this prints with --table. The map matches too: ARCHITECTURE.md's diagram
names every module and executable, the README's layout table names every folder of Sources/,
and every source path either file names in backticks exists. Reads the manifest through `swift
package dump-package` (no build). Prints each target's imports with --graph.

    scripts/check-imports.py [--graph] [--table]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Modules every Swift target may import without declaring them: the toolchain's.
TOOLCHAIN = {"Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization",
             "_Concurrency", "Swift", "XCTest", "Testing", "_StringProcessing"}
IMPORT = re.compile(r"^\s*(?:@testable\s+|@_exported\s+|@preconcurrency\s+)*(?:(?:internal|package|public|private|fileprivate)\s+)?"
                    r"import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)


def module_name(dependency: dict) -> str:
    if "byName" in dependency:
        return dependency["byName"][0]
    if "target" in dependency:
        return dependency["target"][0]
    return dependency["product"][0]


def target_path(target: dict) -> str:
    if target.get("path"):
        return os.path.join(ROOT, target["path"])
    folder = "Tests" if target["type"] == "test" else "Sources"
    return os.path.join(ROOT, folder, target["name"])


# A path in backticks: folders and a file name with an extension (`GQLMuxVocabulary/CloseCode.swift`,
# `Sources/Handover`, `scripts/fuzz.sh`); a file named alone (`Switchboard.swift`) is found anywhere.
PATH = re.compile(r"`((?:[A-Za-z0-9_.+-]+/)*[A-Za-z0-9_+-]+\.(?:swift|sh|py|md|toml|txt|service|socket|catalog)|Sources/[A-Za-z0-9_-]+)`")
SOURCE_FOLDERS = ("", "Sources", "Tests", "scripts", "interop", "docs", "systemd", "config", "Fuzz", "clients")


def check_map(manifest: dict) -> list[str]:
    """ARCHITECTURE.md's diagram and the README's layout name every part; no path they cite is stale."""
    findings = []
    with open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8") as f:
        architecture = f.read()
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    diagram = architecture.split("## Modules", 1)[-1].split("```", 2)[1] if "## Modules" in architecture else ""
    for target in manifest["targets"]:
        if target["type"] in ("regular", "executable", "system") and not re.search(rf"(?<![A-Za-z0-9-]){re.escape(target['name'])}(?![A-Za-z0-9-])", diagram):
            findings.append(f"ARCHITECTURE.md: the module diagram does not show {target['name']}")
    for folder in sorted(os.listdir(os.path.join(ROOT, "Sources"))):
        if f"`Sources/{folder}`" not in readme:
            findings.append(f"README.md: the layout table does not list Sources/{folder}")
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    names = {os.path.basename(f) for f in files}
    folders = {os.path.dirname(f) for f in files} | {os.path.dirname(os.path.dirname(f)) for f in files}
    for document, text in (("ARCHITECTURE.md", architecture), ("README.md", readme)):
        for path in sorted(set(PATH.findall(text))):
            if "/" not in path:
                if path not in names:
                    findings.append(f"{document}: cites {path}, which no file of the repository is named")
                continue
            if not any(os.path.join(base, path).lstrip("/") in files or os.path.join(base, path).lstrip("/") in folders
                       for base in SOURCE_FOLDERS):
                findings.append(f"{document}: cites {path}, which is not a path of the repository")
    return findings


def main() -> int:
    manifest = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, capture_output=True,
                                         text=True, check=True).stdout)
    findings = []
    graph = []
    tables = {}
    for target in manifest["targets"]:
        if target["type"] not in ("regular", "executable", "test"):
            continue
        path = target_path(target)
        sources = [os.path.join(d, f) for d, _, files in os.walk(path) for f in files if f.endswith(".swift")]
        if not sources:
            continue  # a C target
        declared = {module_name(d).replace("-", "_") for d in target["dependencies"]}
        imported = set()
        for source in sources:
            with open(source, encoding="utf-8") as f:
                imported |= set(IMPORT.findall(f.read()))
        imported -= TOOLCHAIN
        imported.discard(target["name"].replace("-", "_"))
        for name in sorted(imported - declared):
            findings.append(f"{target['name']}: imports {name}, which Package.swift does not declare for it")
        for name in sorted(declared - imported):
            findings.append(f"{target['name']}: Package.swift declares {name}, which no file of it imports")
        graph.append(f"{target['name']} → {', '.join(sorted(imported)) or '(nothing of ours)'}")
        tables[target["name"]] = imported
    if "--graph" in sys.argv:
        print("\n".join(graph))
    table = ["| module | imports (ours; then packages') |", "|---|---|"]
    ours = {t["name"] for t in manifest["targets"]}
    for target in manifest["targets"]:
        if target["type"] == "test" or target["name"] not in tables:
            continue
        names = tables[target["name"]]
        own = sorted(n for n in names if n in ours)
        theirs = sorted(n for n in names if n not in ours)
        table.append(f"| {target['name']} | {', '.join(own) or '—'}{'; ' + ', '.join(theirs) if theirs else ''} |")
    table_text = "\n".join(table)
    if "--table" in sys.argv:
        print(table_text)
    # ARCHITECTURE.md's module table is this one, between its markers.
    with open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8") as f:
        architecture = f.read()
    begin, end = "<!-- modules: begin (scripts/check-imports.py --table) -->\n", "\n<!-- modules: end -->"
    if begin not in architecture or end not in architecture:
        findings.append("ARCHITECTURE.md: no module table between its markers")
    elif architecture.split(begin, 1)[1].split(end, 1)[0] != table_text:
        findings.append("ARCHITECTURE.md: the module table differs from Package.swift (print it with scripts/check-imports.py --table)")
    findings += check_map(manifest)
    for finding in findings:
        print(finding)
    if findings:
        return 1
    print(f"map: ARCHITECTURE.md and the README name every module, executable and folder of Sources/, and every path they cite exists")
    print(f"imports: every target imports exactly what Package.swift declares ({len(graph)} targets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
