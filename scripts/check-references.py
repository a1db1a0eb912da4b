#!/usr/bin/env python3
"""The reference docs and the code name the same things, in both directions.

Read from the Swift sources (regular expressions, no build):
  1. config keys: every `allowOnly([...])` of the TOML reader (its section found from the
     `let x = try parent.table("name")` bindings and the reader's call sites), against the key
     tables of docs/configuration.md, config/gqlmuxd.toml (which shows every key) and the keys
     config/samples/*.toml use;
  2. command lines: gqlmuxctl's and gqlmuxd's swift-argument-parser commands (`@Option`,
     `@Flag`, `@Argument`, `@OptionGroup`, subcommands, options GQLMuxCtlEntry takes before
     the verb) against the two tables of docs/cli.md;
  3. metrics: every `registry.make…(descriptor: describe("gqlmux_…"), labels: …)`, with its type
     and label names, against the table of docs/metrics.md;
  4. journal: `DaemonEvent`'s names and MESSAGE_IDs and every `GQLMUX_*` field the daemon sends,
     against docs/journal.md and systemd/gqlmuxd.catalog;
  5. error codes (`LocalErrorCode`) against docs/protocol.md, and the WebSocket close codes the
     local GraphQL endpoint sends against docs/graphql-endpoint.md;
and README.md links to the reference pages instead of copying their tables.

A reference table is a markdown table whose header's first cell names it ("key", "command",
"option", "series", "`GQLMUX_EVENT`", "code", "close code"); each row's first cell names its
entries in backticks. Prints one line per mismatch (`file: what is missing or extra`) and
exits 1 if there is any.

Usage: scripts/check-references.py [REPOSITORY_ROOT]
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
problems = []


def problem(path, text):
    problems.append(f"{path}: {text}")


def read(path):
    return (ROOT / path).read_text(encoding="utf-8")


def swift_files(*directories):
    for directory in directories:
        yield from sorted((ROOT / directory).glob("*.swift"))


def rel(path):
    return str(path.relative_to(ROOT))


def balanced(text, start, open_char="(", close_char=")"):
    """The text from text[start] (an opening bracket) to its matching closing bracket."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == open_char:
            depth += 1
        elif text[index] == close_char:
            depth -= 1
            if depth == 0:
                return text[start : index + 1]
    return text[start:]


def strings(text):
    return re.findall(r'"([^"\\]*)"', text)


def line_of(text, position):
    return text.count("\n", 0, position) + 1


# MARK: - Markdown tables


def split_row(line):
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [cell.strip() for cell in cells[1:-1]]


def tables(path):
    """Every markdown table of `path`: (the heading above it, header cells, rows of cells)."""
    lines = read(path).splitlines()
    heading, fenced = "", False
    found = []
    index = 0
    while index < len(lines):
        line = lines[index]
        fenced ^= line.startswith("```")
        if line.startswith("#") and not fenced:
            heading = line
        if line.startswith("|") and index + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[index + 1].strip()):
            header = split_row(line)
            rows = []
            index += 2
            while index < len(lines) and lines[index].startswith("|"):
                rows.append(split_row(lines[index]))
                index += 1
            found.append((heading, header, rows))
            continue
        index += 1
    return found


def reference_rows(path, name):
    """(heading, cells) of each row of every table of `path` whose header's first cell is `name`."""
    return [(heading, row) for heading, header, rows in tables(path) if header and header[0] == name for row in rows]


def ticked(cell):
    return re.findall(r"`([^`]+)`", cell)


def compare(path, documented, in_code, what, absent, hint=""):
    """Reports what `in_code` ({name: where the code has it}) has and `documented` lacks, and
    what `documented` names that the code does not have (`absent`: where the code was read)."""
    for name in sorted(set(in_code) - set(documented)):
        problem(path, f"{what} {name} is missing: the code has it ({in_code[name]})")
    for name in sorted(set(documented) - set(in_code)):
        problem(path, f"{what} {name} is documented but the code has no such {what} ({absent}){hint}")


# MARK: - 1. Configuration keys

CONFIG_DIRECTORIES = ["Sources/GQLMuxConfiguration", "Sources/UpstreamSettings"]


def config_keys():
    """{(section, key): "file:line"} of every key the TOML reader accepts ("upstream" stands
    for [upstream] and each [upstreams.NAME])."""
    sources = {path: path.read_text(encoding="utf-8") for path in swift_files(*CONFIG_DIRECTORIES)}

    def section_of(variable, path, position, depth=0):
        if depth > 8:
            return None
        text = sources[path][:position]
        bindings = list(re.finditer(rf"\b(?:let|var)\s+{variable}\s*=\s*try\s+(\w+)\.table\(\"(\w+)\"\)", text))
        if bindings:
            parent = section_of(bindings[-1][1], path, bindings[-1].start(), depth + 1)
            return None if parent is None else (parent + "." if parent else "") + bindings[-1][2]
        if re.search(rf"\b(?:let|var)\s+{variable}\s*=\s*TableReader\(table:\s*\w+,\s*section:\s*\"\"\)", text):
            return ""
        functions = list(re.finditer(r"\bfunc\s+(\w+)\s*\(([^)]*)\)", text))
        if not functions or not re.match(rf"\s*_\s+{variable}\s*:\s*TableReader\b", functions[-1][2]):
            return None
        # A parameter: the section of what its callers pass.
        name = functions[-1][1]
        for caller, source in sources.items():
            for call in re.finditer(rf"(?<!func )\b{name}\((\w+)\b", source):
                found = section_of(call[1], caller, call.start(), depth + 1)
                if found is not None:
                    return found
        return None

    accepted = {}
    for path, text in sources.items():
        for call in re.finditer(r"(\w+)\.allowOnly\(\[", text):
            section = section_of(call[1], path, call.start())
            where = f"{rel(path)}:{line_of(text, call.start())}"
            if section is None:
                problem(where, f"cannot tell which TOML section {call[1]}.allowOnly reads (check-references.py follows `let x = try y.table(\"name\")`)")
                continue
            for key in strings(balanced(text, call.end() - 1, "[", "]")):
                accepted[(section, key)] = where
    sections = {section for section, _ in accepted}
    keys = {}
    for (section, key), where in accepted.items():
        child = (section + "." if section else "") + key
        if section == "" or child in sections:
            continue  # a table of its own: its keys are listed
        keys[(section, key)] = where
    if not keys:
        problem(CONFIG_DIRECTORIES[0], "no allowOnly([...]) found: the checker no longer matches the TOML reader")
    return keys


def normalized_section(name):
    return re.sub(r"^upstreams\.[^.\]]+", "upstream", name)


def documented_config_keys(path):
    """(section, key) pairs of configuration.md's key tables: `[section] key`, `[section.key]`
    (a table-valued key), or a bare `key`: of the section named before it in its cell, else of
    the section the nearest heading names first."""
    found = set()
    for heading, row in reference_rows(path, "key"):
        named = re.findall(r"`\[([\w.]+)\]`", heading)
        section = normalized_section(named[0]) if named else None
        for entry in ticked(row[0]):
            match = re.fullmatch(r"\[([\w.]+)\]\s+(\w+)", entry) or re.fullmatch(r"\[([\w.]+)\.(\w+)\]", entry)
            if match:
                section = normalized_section(match[1])
                found.add((section, match[2]))
            elif re.fullmatch(r"[a-z_][a-z0-9_]*", entry):
                if section is None:
                    problem(path, f"`{entry}`: a bare key under a heading that names no `[section]`")
                    continue
                found.add((section, entry))
    return found


def toml_keys(path, keys):
    """(section, key) pairs a TOML file shows, commented out (`# key = …`) or set. A table header
    that is itself a key of `keys` (`[upstream.headers]`) shows that key; what it holds is free."""
    found = set()
    section, free = "", False
    for line in read(path).splitlines():
        text = re.sub(r"^#\s?", "", line.strip())
        header = re.match(r"^\[([\w.]+)\]\s*(#.*)?$", text)
        if header:
            section = normalized_section(header[1])
            parent, _, last = section.rpartition(".")
            free = (parent, last) in keys
            if free:
                found.add((parent, last))
            continue
        # An assignment alone on its line (prose such as `identity = "client": each app's…` is not).
        key = re.match(r"^([a-z_][a-z0-9_]*)\s*=\s*(?:\"[^\"]*\"|\[[^\]]*\]|\{[^}]*\}|[\w.+-]+)\s*(?:#.*)?$", text)
        if key and not free:
            found.add((section, key[1]))
    return found


def show(pair):
    return f"[{pair[0]}] {pair[1]}"


def check_config():
    keys = config_keys()
    in_code = {show(pair): f"accepted at {where}" for pair, where in keys.items()}
    absent = "no allowOnly list of " + " or ".join(CONFIG_DIRECTORIES) + " accepts it"
    documented = {show(pair) for pair in documented_config_keys("docs/configuration.md")}
    compare("docs/configuration.md", documented, in_code, "key", absent)
    compare("config/gqlmuxd.toml", {show(pair) for pair in toml_keys("config/gqlmuxd.toml", keys)}, in_code, "key", absent)
    for sample in sorted((ROOT / "config/samples").glob("*.toml")):
        for pair in sorted(toml_keys(rel(sample), keys) - set(keys)):
            problem(rel(sample), f"key {show(pair)} is not accepted by the TOML reader ({absent})")


# MARK: - 2. Command lines

CLI_DIRECTORIES = ["Sources/GQLMuxCtlCommand", "Sources/gqlmuxd", "Sources/gqlmuxctl"]
BUILTIN_OPTIONS = {"--help", "-h", "--version"}  # swift-argument-parser adds them


def kebab(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).lower()


def commands():
    """{"gqlmuxctl subscribe": (positional arguments, {options}, "file")} for every command."""
    structs = {}
    for path in swift_files(*CLI_DIRECTORIES):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"\b(?:struct|enum)\s+(\w+)\s*(?::\s*([\w, ]+))?\{", text):
            structs[match[1]] = (balanced(text, match.end() - 1, "{", "}"), rel(path))

    def parsed(name):
        """Positional arguments and options of struct `name` (its option groups included)."""
        body = structs[name][0]
        arguments, options = [], set()
        for wrapper in re.finditer(r"@(Option|Flag|Argument|OptionGroup)\b", body):
            attributes = balanced(body, wrapper.end()) if body[wrapper.end() : wrapper.end() + 1] == "(" else ""
            declaration = re.match(r"\s*(?:public\s+|package\s+)?var\s+(\w+)\s*(?::\s*(\w+))?", body[wrapper.end() + len(attributes) :])
            if not declaration:
                continue
            variable, type_name = declaration[1], declaration[2]
            if wrapper[1] == "OptionGroup":
                if type_name in structs:
                    group_arguments, group_options = parsed(type_name)
                    arguments += group_arguments
                    options |= group_options
                continue
            if wrapper[1] == "Argument":
                arguments.append(kebab(variable).upper())
                continue
            names = re.findall(r'\.customLong\("([\w-]+)"', attributes)
            options |= {"--" + long for long in names}
            options |= {"-" + short for short in re.findall(r"\.customShort\(\"(\w)\"", attributes)}
            if re.search(r"\.shortAndLong\b|\.short\b", attributes):
                options.add("-" + variable[0])
            if not names and not re.search(r"name:\s*\.(short|customShort)\b", attributes):
                options.add("--" + kebab(variable))
        return arguments, options

    found = {}
    children = {}
    for name, (body, _) in structs.items():
        configuration = re.search(r"CommandConfiguration\(", body)
        if not configuration:
            continue
        settings = balanced(body, configuration.end() - 1)
        command = re.search(r'commandName:\s*"([\w-]+)"', settings)
        listed = re.search(r"subcommands:\s*\[([^\]]*)\]", settings)
        children[name] = (command[1] if command else kebab(name), re.findall(r"(\w+)\.self", listed[1]) if listed else [])
    roots = set(children) - {child for _, subcommands in children.values() for child in subcommands}

    def visit(name, prefix):
        word, subcommands = children[name]
        full = f"{prefix} {word}".strip()
        arguments, options = parsed(name)
        found[full] = (arguments, options, structs[name][1])
        for child in subcommands:
            visit(child, full)

    for root in sorted(roots):
        visit(root, "")
    # Options an entry point moves from before the verb to after it (`gqlmuxctl --socket P status`).
    for body, _ in structs.values():
        rewritten = re.findall(r'first\s*==\s*"(--[\w-]+)"', body)
        main = re.search(r"(\w+)\.main\(", body)
        if rewritten and main and main[1] in children:
            root = children[main[1]][0]
            arguments, options, where = found[root]
            found[root] = (arguments, options | set(rewritten), where)
    return found


def check_cli():
    path = "docs/cli.md"
    in_code = commands()
    absent = "no @Option, @Flag or command of " + ", ".join(CLI_DIRECTORIES) + " declares it"
    hint = "; an option documented ahead of its code passes once the code declares it"
    documented_commands = {}
    for _, row in reference_rows(path, "command"):
        words = (ticked(row[0]) or [""])[0].split()
        command = " ".join(word for word in words if not word.isupper())
        arguments = [word for word in words if word.isupper()]
        options = {span.split()[0] for cell in row[1:] for span in ticked(cell) if span.startswith("-")}
        documented_commands[command] = (arguments, options - BUILTIN_OPTIONS)
    described = {span.split()[0] for _, row in reference_rows(path, "option") for span in ticked(row[0]) if span.startswith("-")}
    compare(path, documented_commands, {c: where for c, (_, _, where) in in_code.items()}, "command", absent)
    for command in sorted(set(documented_commands) & set(in_code)):
        arguments, options, source = in_code[command]
        doc_arguments, doc_options = documented_commands[command]
        if arguments != doc_arguments:
            problem(path, f"`{command}` takes {' '.join(arguments) or 'no argument'} in the code ({source}), documented as {' '.join(doc_arguments) or 'none'}")
        compare(path, {f"`{command} {o}`" for o in doc_options}, {f"`{command} {o}`": source for o in options}, "option", absent, hint)
    every_option = {option: where for _, options, where in in_code.values() for option in options}
    compare(path, {f"{o} (option table)" for o in described - BUILTIN_OPTIONS}, {f"{o} (option table)": w for o, w in every_option.items()}, "option", absent, hint)


# MARK: - 3. Metrics


def metrics():
    """{name: (type, {labels}, "file:line")} of every series the daemon registers."""
    kinds = {"Gauge": "gauge", "Counter": "counter", "DurationHistogram": "histogram", "ValueHistogram": "histogram", "Summary": "summary"}
    found = {}
    for path in (ROOT / "Sources").rglob("*.swift"):
        text = path.read_text(encoding="utf-8")
        for call in re.finditer(r"\.make(Gauge|Counter|DurationHistogram|ValueHistogram|Summary)\(", text):
            arguments = balanced(text, call.end() - 1)
            name = re.search(r'"(gqlmux_\w+)"', arguments)
            if not name:
                continue
            labels = set(re.findall(r'\(\s*"(\w+)"\s*,', arguments.split("labels:", 1)[1])) if "labels:" in arguments else set()
            kind, known, where = found.get(name[1], (kinds[call[1]], set(), f"{rel(path)}:{line_of(text, call.start())}"))
            found[name[1]] = (kind, known | labels, where)
    return found


def check_metrics():
    path = "docs/metrics.md"
    in_code = metrics()
    documented = {}
    for _, row in reference_rows(path, "series"):
        for span in ticked(row[0]):
            match = re.fullmatch(r"(gqlmux_\w+)(?:\{(.*)\})?", span)
            if match:
                labels = {label.split("=")[0].strip() for label in (match[2] or "").split(",") if label.strip()}
                documented[match[1]] = (row[1] if len(row) > 1 else "", labels)
    compare(path, documented, {name: where for name, (_, _, where) in in_code.items()}, "series", "no registry.make… call in Sources registers it")
    for name in sorted(set(documented) & set(in_code)):
        kind, labels, where = in_code[name]
        doc_kind, doc_labels = documented[name]
        if kind != doc_kind:
            problem(path, f"{name} is a {kind} in the code ({where}), documented as {doc_kind or 'no type'}")
        if labels != doc_labels:
            shown = ",".join(sorted(labels)) or "no label"
            problem(path, f"{name} has labels {{{shown}}} in the code ({where}), documented {{{','.join(sorted(doc_labels)) or 'none'}}}")


# MARK: - 4. Journal events, fields and the catalog

EVENTS_FILE = "Sources/GQLMuxDaemon/DaemonEvents.swift"


def journal_events():
    """{event name: MESSAGE_ID} of DaemonEvent."""
    text = read(EVENTS_FILE)
    body = balanced(text, text.index("{", text.index("enum DaemonEvent")), "{", "}")
    names = {}
    for case in re.findall(r"^\s*case\s+([^\n]+)", body.split("var messageID")[0], re.M):
        for item in case.split(","):
            match = re.fullmatch(r"\s*(\w+)\s*(?:=\s*\"(\w+)\")?\s*", item)
            if match:
                names[match[1]] = match[2] or match[1]
    ids = dict(re.findall(r'case\s+\.(\w+):\s*"([0-9a-f]{32})"', body))
    for case in sorted(set(names) - set(ids)):
        problem(EVENTS_FILE, f"event {names[case]} has no MESSAGE_ID")
    return {names[case]: ids.get(case, "") for case in names}


# Test servers, benchmarks and fuzzers: their GQLMUX_* names are environment variables.
NOT_THE_DAEMON = {"TestUpstream", "GQLMuxTestSupport", "gqlmux-test-upstream", "gqlmux-bench", "GQLMuxFuzz", "gqlmux-parse-probe"}


def journal_fields():
    """{field: "file:line"}: every GQLMUX_* name used as a journal field (a dictionary key or a
    subscript, not an environment variable) by the daemon's modules."""
    found = {}
    for path in sorted((ROOT / "Sources").rglob("*.swift")):
        if path.relative_to(ROOT / "Sources").parts[0] in NOT_THE_DAEMON:
            continue
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r'(?<!environment)\[\s*"(GQLMUX_[A-Z0-9_]+)"\s*\]|"(GQLMUX_[A-Z0-9_]+)"\s*:', text):
            found.setdefault(match[1] or match[2], f"{rel(path)}:{line_of(text, match.start())}")
    return found


def check_journal():
    path = "docs/journal.md"
    events = journal_events()
    documented = {event for _, row in reference_rows(path, "`GQLMUX_EVENT`") for event in ticked(row[0])}
    compare(path, documented, {event: f"DaemonEvent in {EVENTS_FILE}" for event in events}, "event", f"DaemonEvent in {EVENTS_FILE}")
    fields = journal_fields()
    compare(path, set(re.findall(r"\bGQLMUX_[A-Z0-9_]+\b", read(path))), fields, "field", "the daemon's modules never send it")
    catalog = "systemd/gqlmuxd.catalog"
    text = read(catalog)
    entries = re.findall(r"^-- ([0-9a-f]{32})$", text, re.M)
    by_id = {message_id: event for event, message_id in events.items()}
    for event, message_id in sorted(events.items()):
        if message_id and message_id not in entries:
            problem(catalog, f"no entry for event {event} (MESSAGE_ID {message_id})")
    for message_id in sorted(set(entries) - set(by_id)):
        problem(catalog, f"entry {message_id} is the MESSAGE_ID of no event of {EVENTS_FILE}")
    for field in sorted(set(re.findall(r"@(GQLMUX_[A-Z0-9_]+)@", text)) - set(fields)):
        problem(catalog, f"@{field}@ is no field the daemon sends")


# MARK: - 5. Error codes and close codes


def check_codes():
    path = "docs/protocol.md"
    source = "Sources/LocalProtocol/LocalMessages.swift"
    text = read(source)
    body = balanced(text, text.index("{", text.index("enum LocalErrorCode")), "{", "}")
    in_code = set(re.findall(r'=\s*"([A-Z_]+)"', body))
    documented = {code for _, row in reference_rows(path, "code") for code in ticked(row[0])}
    compare(path, documented, {code: f"LocalErrorCode in {source}" for code in in_code}, "error code", f"LocalErrorCode in {source}")

    # Close codes: what the endpoint's WebSocket session closes with (its close(.case, …) calls
    # and closeCode(forConnectionError:)), and NIO's frame decoder's own closes when the
    # endpoint lets it answer protocol errors (1002 a bad frame, 1009 a frame too large).
    numbers = dict(re.findall(r"case\s+\.(\w+):\s*(\d{4})\b", read("Sources/GQLMuxVocabulary/CloseCode.swift")))
    session_file = "Sources/LocalEndpoint/WebSocketServerSession.swift"
    session = read(session_file)
    cases = set(re.findall(r"\bclose\(\s*\.(\w+)\s*,", session))
    mapping = re.search(r"func closeCode\(forConnectionError[^{]*\{", session)
    if mapping:
        cases |= set(re.findall(r":\s*\.(\w+)", balanced(session, mapping.end() - 1, "{", "}")))
    closes = {}
    for case in sorted(cases):
        if case in numbers:
            closes[numbers[case]] = f".{case} in {session_file}"
        else:
            problem(session_file, f"close code .{case} is no case of CloseCode")
    pipeline = "\n".join(p.read_text(encoding="utf-8") for p in swift_files("Sources/EndpointServer"))
    for code in re.findall(r"writeInteger\(UInt16\((\d{4})\)\)", pipeline):  # a close frame written by hand
        closes.setdefault(code, "a close frame written in Sources/EndpointServer")
    if "WebSocketProtocolErrorHandler()" in pipeline or "automaticErrorHandling: true" in pipeline:
        closes |= {"1002": "NIO's WebSocketProtocolErrorHandler in Sources/EndpointServer", "1009": "NIO's WebSocketProtocolErrorHandler in Sources/EndpointServer"}
    endpoint = "docs/graphql-endpoint.md"
    documented_closes = {code for _, row in reference_rows(endpoint, "close code") for code in re.findall(r"\b\d{4}\b", row[0])}
    compare(endpoint, documented_closes, closes, "close code", f"neither {session_file} nor NIO's protocol error handler sends it")


# MARK: - README: links, not copies


def check_readme():
    path = "README.md"
    text = read(path)
    for page in ["docs/configuration.md", "docs/metrics.md", "docs/cli.md", "docs/journal.md"]:
        if f"]({page}" not in text:
            problem(path, f"no link to {page}")
    reference_headers = {"key", "command", "option", "series", "`GQLMUX_EVENT`", "code", "close code"}
    for heading, header, _ in tables(path):
        if header and header[0] in reference_headers:
            problem(path, f"copies a reference table ('{header[0]}' under '{heading}'): link to the page in docs/ instead")


for check in [check_config, check_cli, check_metrics, check_journal, check_codes, check_readme]:
    check()
for line in problems:
    print(line)
if problems:
    print(f"check-references: {len(problems)} mismatch(es) between the code and its reference docs")
    sys.exit(1)
print("check-references: the docs name every config key, command option, metric, journal event and field, error and close code the code has, and nothing else")
