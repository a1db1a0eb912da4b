#!/usr/bin/env python3
"""The object files a target needs to be linked: the target and every module it depends on,
read from SwiftPM's own build plan (the llbuild manifest, `<scratch>/<configuration>.yaml`).
scripts/fuzz.sh links its libFuzzer harnesses from them, so a build folder that holds more
(the release build's, with every product of the package) still gives only what the target needs.

    scripts/fuzz-closure.py MANIFEST TARGET        (one object path per line)
"""
import os
import re
import sys


def commands(manifest):
    """Each module's compile command (module name -> its inputs and args lines), and every
    object file the plan makes (module name -> paths): only these are linked, never an object a
    deleted or renamed source left in a build folder kept between runs."""
    found, objects, name, lines = {}, {}, None, {}
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
            if line.startswith("    outputs: "):
                for path in re.findall(r'"([^"]+\.o)"', line):
                    module = re.search(r'/([^/]+)\.build/', path)
                    if module:
                        objects.setdefault(module.group(1), []).append(path)
    return found, objects


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
    table, planned = commands(manifest)
    if target not in table:
        sys.exit(f"fuzz-closure: {target} has no compile command in {manifest}")
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
        objects.extend(sorted(set(planned.get(module, []))))
    missing = [path for path in objects if not os.path.exists(path)]
    if not objects or missing:
        sys.exit(f"fuzz-closure: {target}'s build is not complete: {len(objects)} objects planned, missing {missing[:3]}")
    print("\n".join(objects))


if __name__ == "__main__":
    main()
