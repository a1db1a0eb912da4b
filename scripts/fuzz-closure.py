#!/usr/bin/env python3
"""The object files a target needs to be linked: the target and every module it depends on,
read from SwiftPM's own build plan (the llbuild manifest, `<scratch>/<configuration>.yaml`).
scripts/fuzz.sh links its libFuzzer harnesses from them, so a build folder that holds more
(the release build's, with every product of the package) still gives only what the target needs.

    scripts/fuzz-closure.py MANIFEST TARGET        (one object path per line)
"""
import glob
import os
import re
import sys


def commands(manifest):
    """Each module's compile command: module name -> (inputs line, args line)."""
    found, name, lines = {}, None, {}
    header = re.compile(r'^  "C\.(.+?)-[^-"]+-[^-"]+-[^-"]+-[^-"]+-[a-z]+\.module":$')
    with open(manifest) as text:
        for line in text:
            match = header.match(line.rstrip("\n"))
            if match:
                name, lines = match.group(1), {}
                found[name] = lines
            elif name is not None and line.startswith("    ") and ":" in line:
                key, _, value = line.strip().partition(": ")
                lines[key] = value
            elif not line.startswith("    "):
                name = None
    return found


def dependencies(command):
    """The modules one compile command reads: Swift modules among its inputs, C modules among
    the module maps it is given."""
    swift = re.findall(r'/Modules/([^/"]+)\.swiftmodule"', command.get("inputs", ""))
    maps = re.findall(r'-fmodule-map-file=([^"]+)"', command.get("args", ""))
    c = []
    for path in maps:
        match = re.search(r'/Sources/([^/]+)/include/', path) or re.search(r'/([^/]+)\.build/module\.modulemap$', path)
        if match:
            c.append(match.group(1))
    return swift, c


def main():
    manifest, target = sys.argv[1], sys.argv[2]
    configuration = os.path.splitext(os.path.basename(manifest))[0]
    table = commands(manifest)
    if target not in table:
        sys.exit(f"fuzz-closure: {target} has no compile command in {manifest}")
    bin_dir = os.path.join(os.path.dirname(manifest), configuration)
    closure, pending = set(), [target]
    while pending:
        module = pending.pop()
        if module in closure:
            continue
        closure.add(module)
        if module in table:
            swift, c = dependencies(table[module])
            pending.extend(swift)
            closure.update(c)
    objects = []
    for module in sorted(closure):
        objects.extend(sorted(glob.glob(os.path.join(bin_dir, f"{module}.build", "**", "*.o"), recursive=True)))
    if not objects:
        sys.exit(f"fuzz-closure: no object files for {target} under {bin_dir}")
    print("\n".join(objects))


if __name__ == "__main__":
    main()
