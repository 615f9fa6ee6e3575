#!/usr/bin/env python3
"""Print the workspace's crate graph and each crate's module import graph; fail
on a crate dependency against the layer order, or on a circle.

    scripts/check-imports.py              # the graphs, then the verdict
    scripts/check-imports.py --quiet      # only the failures and the verdict
    scripts/check-imports.py --self-test  # shows each check firing on fake graphs

The crate graph is read from the `Cargo.toml` files (path dependencies between
workspace members; `[dev-dependencies]` are shown apart, as cargo allows them to
point back, and are not held to the layers). Every crate sits in one layer of
`LAYERS`, lowest first:

    api, harness  ->  sdk, history, services  ->  bench-core  ->  bench-analysis
      ->  bench-driver, bench-report  ->  the commands (bench, experiments)

A dependency must point to a strictly lower layer: one that points up, or
sideways to a crate of its own layer (the two commands must never depend on
each other; `bench adr` starts the experiments binary as a process, which is
no crate edge), fails and is named. A crate missing from `LAYERS` fails too:
place a new crate before it can depend on anything.

A module graph has one node per source file of a crate's
`src/` tree; an edge A -> B means A names an item of B: a `use` of it, a
`pub use` re-export, or a path such as `crate::b::f()` or `super::T` in code.
Declaring a child (`mod b;`) is not an edge, and neither is a path inside a
comment, a doc link or a string. A child that names its own parent (for
example `use super::Plan` from `cell/pool.rs` into `cell/mod.rs`, which in
turn re-exports the pool) is a circle like any other: a parent that is a
facade over its children keeps the arrows pointing one way.

The same graph is also checked one level up, module by module: each file
counts as its crate's top-level module (`cell/pool.rs` is `cell`; the crate
root `lib.rs`/`main.rs` is left out, being the crate itself), and two
top-level modules that name each other, through any of their files, are a
circle even when no two files are (`chaos` -> `cli` -> `chaos`).

Exit status: 0 when every crate dependency follows the layers and no crate,
module or top-level module graph has a circle; 1 otherwise (each failure is
listed, naming the edge or the circle); 2 on a usage error. `--self-test`
exits 0 when every check fires on the fake graph built to break it and stays
quiet on a clean one, 1 otherwise.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The crates' layers, lowest first: a dependency points to a lower layer.
LAYERS: list[list[str]] = [
    ["fencepost-api", "fencepost-harness"],
    ["fencepost-sdk", "bench-history", "lock-server", "rail-stub"],
    ["bench-core"],
    ["bench-analysis"],
    ["bench-driver", "bench-report"],
    ["bench", "experiments"],
]


# ---------------------------------------------------------------- crates


@dataclass
class Crate:
    """One workspace member: its package name, folder and workspace dependencies."""

    name: str
    folder: str
    deps: set[str] = field(default_factory=set)
    dev_deps: set[str] = field(default_factory=set)


def workspace_crates() -> dict[str, Crate]:
    """Every workspace member, keyed by package name, with its path dependencies."""
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        ws = tomllib.load(f)
    members: list[str] = []
    for pattern in ws["workspace"]["members"]:
        members += sorted(glob.glob(os.path.join(ROOT, pattern)))
    ws_deps = ws["workspace"].get("dependencies", {})
    by_folder: dict[str, Crate] = {}
    manifests: dict[str, dict] = {}
    for folder in members:
        path = os.path.join(folder, "Cargo.toml")
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            manifest = tomllib.load(f)
        rel = os.path.relpath(folder, ROOT)
        by_folder[os.path.realpath(folder)] = Crate(manifest["package"]["name"], rel)
        manifests[os.path.realpath(folder)] = manifest

    def path_of(folder: str, name: str, spec) -> str | None:
        if isinstance(spec, dict) and spec.get("workspace"):
            spec = ws_deps.get(name, {})
            base = ROOT
        else:
            base = folder
        if isinstance(spec, dict) and "path" in spec:
            return os.path.realpath(os.path.join(base, spec["path"]))
        return None

    for folder, manifest in manifests.items():
        crate = by_folder[folder]
        for table, into in (("dependencies", crate.deps), ("dev-dependencies", crate.dev_deps)):
            for name, spec in manifest.get(table, {}).items():
                target = path_of(folder, name, spec)
                if target in by_folder:
                    into.add(by_folder[target].name)
    return {c.name: c for c in by_folder.values()}


# --------------------------------------------------------------- lexing


def strip_code(text: str) -> str:
    """The text with comments, string and char literals blanked (newlines kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'b?r(#*)"', text[i : i + 260])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + raw.group(1)
            j = text.find(close, i + raw.end())
            j = n if j < 0 else j + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '\u{1F}'), not a lifetime ('a).
            m = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i : i + 12])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d as e}}` -> ['a::b', 'a::c::d'] (aliases dropped, globs cut to their module)."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def split_top(s: str) -> list[str]:
        parts, depth, start = [], 0, 0
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        return [p for p in parts if p]

    def walk(prefix: str, s: str) -> list[str]:
        brace = s.find("{")
        if brace < 0:
            full = prefix + s
            if full.endswith("::*"):
                full = full[:-3]
            return [full]
        head = s[:brace]
        inner = s[brace + 1 : s.rfind("}")]
        result = []
        for part in split_top(inner):
            result += walk(prefix + head, part)
        return result

    return [p[:-6] if p.endswith("::self") else p for p in walk("", tree)]


USE_RE = re.compile(r"\buse\s+([^;]+);")
PATH_RE = re.compile(r"(?<![\w$:])((?:crate|super|self)(?:\s*::\s*\w+)+)")
MOD_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
INLINE_MOD_RE = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")


# -------------------------------------------------------------- modules


@dataclass
class Module:
    """A module backed by a file: its path segments and its file (relative to the crate)."""

    path: tuple[str, ...]
    file: str


def module_tree(src: str, root_file: str) -> dict[tuple[str, ...], Module]:
    """Every file-backed module reachable from `root_file` through `mod x;` declarations."""
    modules: dict[tuple[str, ...], Module] = {}

    def visit(path: tuple[str, ...], file: str, dir_for_children: str) -> None:
        modules[path] = Module(path, os.path.relpath(file, src))
        with open(file, encoding="utf-8") as f:
            code = strip_code(f.read())
        for m in MOD_RE.finditer(code):
            name = m.group(1)
            a = os.path.join(dir_for_children, name + ".rs")
            b = os.path.join(dir_for_children, name, "mod.rs")
            if os.path.isfile(a):
                visit(path + (name,), a, os.path.join(dir_for_children, name))
            elif os.path.isfile(b):
                visit(path + (name,), b, os.path.join(dir_for_children, name))

    visit((), os.path.join(src, root_file), src)
    return modules


def inline_module_at(code: str, offset: int) -> tuple[str, ...]:
    """The inline `mod x { ... }` blocks that enclose `offset`, outermost first."""
    stack: list[tuple[str, int]] = []
    depth = 0
    i = 0
    opens = {m.end() - 1: m.group(1) for m in INLINE_MOD_RE.finditer(code)}
    pending: list[tuple[str | None, int]] = []
    while i < offset:
        ch = code[i]
        if ch == "{":
            depth += 1
            pending.append((opens.get(i), depth))
        elif ch == "}":
            if pending:
                pending.pop()
            depth -= 1
        i += 1
    return tuple(name for name, _ in pending if name)


def references(code: str, children: set[str]) -> list[tuple[int, str]]:
    """(offset, path) for every path into the crate's modules, use trees expanded.

    A path counts when it starts with `crate`, `super` or `self`, or with the
    name of a child module of the file (`pool::spawn()`, `pub use pool::Pool`);
    such a bare path is returned as `self::…`.
    """
    found: list[tuple[int, str]] = []
    use_spans = []
    bare = re.compile(r"(" + "|".join(map(re.escape, sorted(children))) + r")\b") if children else None
    for m in USE_RE.finditer(code):
        use_spans.append((m.start(), m.end()))
        for p in expand_use_tree(m.group(1)):
            if re.match(r"(crate|super|self)\b", p):
                found.append((m.start(), p))
            elif bare and "::" in p and bare.fullmatch(p.split("::")[0]):
                found.append((m.start(), "self::" + p))
    patterns = [PATH_RE]
    if children:
        names = "|".join(map(re.escape, sorted(children)))
        patterns.append(re.compile(r"(?<![\w$:])((?:" + names + r")(?:\s*::\s*\w+)+)"))
    for k, pattern in enumerate(patterns):
        for m in pattern.finditer(code):
            if any(a <= m.start() < b for a, b in use_spans):
                continue
            path = re.sub(r"\s+", "", m.group(1))
            found.append((m.start(), path if k == 0 else "self::" + path))
    return found


def resolve(
    modules: dict[tuple[str, ...], Module], here: tuple[str, ...], path: str
) -> tuple[str, ...] | None:
    """The file-backed module a path lands in (the deepest module its segments walk through)."""
    segs = path.split("::")
    if segs[0] == "crate":
        cur: tuple[str, ...] = ()
        segs = segs[1:]
    else:
        cur = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not cur:
                    return None
                cur = cur[:-1]
            segs = segs[1:]
    # Walk into child modules as far as they exist.
    while segs and cur + (segs[0],) in modules:
        cur = cur + (segs[0],)
        segs = segs[1:]
    # `cur` may be an inline module path: back off to the file that holds it.
    while cur not in modules:
        cur = cur[:-1]
    return cur


def module_graph(crate_dir: str, root_file: str) -> dict[str, set[str]]:
    """file -> files it names, for one crate root (lib.rs or main.rs)."""
    src = os.path.join(crate_dir, "src")
    modules = module_tree(src, root_file)
    graph: dict[str, set[str]] = {m.file: set() for m in modules.values()}
    for mod in modules.values():
        with open(os.path.join(src, mod.file), encoding="utf-8") as f:
            code = strip_code(f.read())
        children = {p[-1] for p in modules if p[:-1] == mod.path and p}
        for offset, path in references(code, children):
            here = mod.path + inline_module_at(code, offset)
            target = resolve(modules, here, path)
            if target is None:
                continue
            tfile = modules[target].file
            if tfile != mod.file:
                graph[mod.file].add(tfile)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def layer_failures(deps: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """Each crate dependency that does not point to a strictly lower layer, and
    each crate that has no layer."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    out = []
    for name in sorted(deps):
        if name not in rank:
            out.append(f"crate {name} has no layer: add it to LAYERS in scripts/check-imports.py")
            continue
        for dep in sorted(deps[name]):
            if dep not in rank:
                continue  # reported as its own crate
            if rank[dep] > rank[name]:
                out.append(
                    f"crate edge up the layers: {name} (layer {rank[name]}) -> {dep} (layer {rank[dep]})"
                )
            elif rank[dep] == rank[name]:
                out.append(
                    f"crate edge sideways within layer {rank[name]}: {name} -> {dep}"
                )
    return out


def top_module(file: str) -> str | None:
    """The top-level module a file belongs to (`cell/pool.rs` -> `cell`); None for the root."""
    if file in ("lib.rs", "main.rs"):
        return None
    first = file.split("/")[0]
    return first[:-3] if first.endswith(".rs") else first


def top_level_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The file graph folded onto top-level modules (the root left out)."""
    out: dict[str, set[str]] = {}
    for f, deps in graph.items():
        a = top_module(f)
        if a is None:
            continue
        out.setdefault(a, set())
        for d in deps:
            b = top_module(d)
            if b is not None and b != a:
                out[a].add(b)
    return out


def self_test() -> int:
    """Builds graphs that break each rule and checks that each check fires."""
    ok = True

    def expect(what: str, got: list, want_fail: bool) -> None:
        nonlocal ok
        fired = bool(got)
        verdict = "fires" if fired else "quiet"
        good = fired == want_fail
        ok &= good
        print(f"  {'ok  ' if good else 'FAIL'} {what}: {verdict}" + (f" ({got[0]})" if got else ""))

    layers = [["api"], ["core"], ["driver", "report"], ["bench", "experiments"]]
    clean = {"api": set(), "core": {"api"}, "driver": {"core"}, "report": {"core"},
             "bench": {"driver", "report"}, "experiments": {"driver", "core"}}
    print("self-test: crate layers")
    expect("a clean crate graph", layer_failures(clean, layers), False)
    up = {**clean, "core": {"api", "driver"}}
    expect("an upward edge core -> driver", layer_failures(up, layers), True)
    side = {**clean, "experiments": {"driver", "bench"}}
    expect("a sideways edge experiments -> bench", layer_failures(side, layers), True)
    stray = {**clean, "new-crate": {"api"}}
    expect("a crate without a layer", layer_failures(stray, layers), True)

    print("self-test: top-level module circles")
    files = {
        "lib.rs": {"cli.rs", "chaos/mod.rs"},
        "cli.rs": {"chaos/schedule.rs"},
        "chaos/mod.rs": {"chaos/schedule.rs", "chaos/model.rs"},
        "chaos/schedule.rs": set(),
        "chaos/model.rs": set(),
    }
    expect("a clean module graph", circles(top_level_graph(files)) + circles(files), False)
    knot = {**files, "chaos/model.rs": {"cli.rs"}}
    expect("file graph of the chaos <-> cli knot (no file circle)", circles(knot), False)
    expect("top-level graph of the chaos <-> cli knot", circles(top_level_graph(knot)), True)
    file_circle = {**files, "chaos/schedule.rs": {"chaos/mod.rs"}}
    expect("a file circle", circles(file_circle), True)
    print("check-imports self-test: " + ("ok, every check fires where it must" if ok else "FAILED"))
    return 0 if ok else 1


def depth_of(graph: dict[str, set[str]]) -> dict[str, int]:
    """Longest path below each node (0 for a leaf); only meaningful without circles."""
    memo: dict[str, int] = {}

    def d(v: str, seen: frozenset[str]) -> int:
        if v in memo:
            return memo[v]
        deps = [w for w in graph.get(v, ()) if w not in seen]
        memo[v] = 0 if not deps else 1 + max(d(w, seen | {w}) for w in deps)
        return memo[v]

    return {v: d(v, frozenset([v])) for v in graph}


def main(argv: list[str]) -> int:
    quiet = False
    for arg in argv:
        if arg == "--quiet":
            quiet = True
        elif arg == "--self-test":
            return self_test()
        elif arg in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            print(f"check-imports: unknown argument {arg!r} (try --help)", file=sys.stderr)
            return 2
    crates = workspace_crates()
    failures: list[str] = []

    if not quiet:
        print("crate graph (-> dependency; dev -> dev-dependency)")
    crate_graph = {name: set(c.deps) for name, c in crates.items()}
    for name in sorted(crates):
        c = crates[name]
        if not quiet:
            deps = ", ".join(sorted(c.deps)) or "-"
            dev = sorted(c.dev_deps - c.deps)
            extra = f"   (dev -> {', '.join(dev)})" if dev else ""
            print(f"  {name} ({c.folder}) -> {deps}{extra}")
    for comp in circles(crate_graph):
        failures.append("crate circle: " + " <-> ".join(comp))
    failures += layer_failures(crate_graph, LAYERS)
    if not quiet:
        print("\ncrate layers (lowest first; a dependency points to a lower layer)")
        for i, layer in enumerate(LAYERS):
            print(f"  {i}: {', '.join(layer)}")

    for name in sorted(crates):
        c = crates[name]
        crate_dir = os.path.join(ROOT, c.folder)
        for root_file in ("lib.rs", "main.rs"):
            if not os.path.isfile(os.path.join(crate_dir, "src", root_file)):
                continue
            graph = module_graph(crate_dir, root_file)
            comps = circles(graph)
            if not quiet:
                levels = depth_of(graph) if not comps else {}
                layers = (max(levels.values()) + 1) if levels else "-"
                print(f"\n{name} (src/{root_file}): {len(graph)} files, {layers} layers")
                for f in sorted(graph):
                    deps = ", ".join(sorted(graph[f])) or "-"
                    print(f"  {f} -> {deps}")
            for comp in comps:
                failures.append(f"module circle in {name} (src/{root_file}): " + " <-> ".join(comp))
            top = top_level_graph(graph)
            if not quiet and len(top) > 1:
                print(f"  top-level modules:")
                for m in sorted(top):
                    print(f"    {m} -> {', '.join(sorted(top[m])) or '-'}")
            for comp in circles(top):
                failures.append(
                    f"top-level module circle in {name} (src/{root_file}): " + " <-> ".join(comp)
                )

    print()
    if failures:
        for line in failures:
            print(line)
        print(f"check-imports: FAILED, {len(failures)} failure(s)")
        return 1
    print(
        f"check-imports: ok, {len(crates)} crates in {len(LAYERS)} layers, every dependency "
        "points down, no circle in the crate graph, any module graph or any top-level module graph"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
