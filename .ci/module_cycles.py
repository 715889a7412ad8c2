#!/usr/bin/env python3
"""Fails when modules of a crate import each other in a cycle.

For every crate under the workspace, each file-level module (a `.rs` file
under `src/`) gets an edge to every module it names through `crate::a::b`,
`super::x` or `self::x` paths (in `use` items and in expressions). A module
and its own ancestors or descendants are one unit (a parent declares and
re-exports its children), so only edges between siblings count: `a::x` to
`a::y` is an edge between `x` and `y` under `a`. Any strongly connected set of
two or more siblings is a cycle and is printed; the exit status is 1.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def module_of(src: pathlib.Path, f: pathlib.Path) -> tuple:
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests(text: str) -> str:
    """Drops comments (doc links are not imports) and `#[cfg(test)] mod tests
    { ... }` blocks (tests may reach anywhere)."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def targets(mod: tuple, text: str, modules: set) -> set:
    found = set()
    paths = []
    for m in USE_GROUP.finditer(text):
        for item in re.split(r",", m.group(3)):
            item = item.strip().split(" as ")[0].strip()
            if item and item != "self":
                paths.append((m.group(1), m.group(2) + "::" + item.split("::{")[0]))
    paths += [(m.group(1), m.group(2)) for m in PATH.finditer(text)]
    for head, rest in paths:
        names = [p for p in rest.split("::") if p]
        if head == "crate":
            base = []
        elif head == "super":
            base = list(mod[:-1])
            while names and names[0] == "super":
                base, names = base[:-1], names[1:]
        else:
            base = list(mod)
        full = tuple(base + names)
        # The longest prefix that is a module.
        for k in range(len(full), -1, -1):
            if full[:k] in modules:
                found.add(full[:k])
                break
    return found


def crate_cycles(src: pathlib.Path) -> list:
    files = [f for f in src.rglob("*.rs") if f.name != "tests.rs" and "tests" not in f.relative_to(src).parts]
    modules = {module_of(src, f) for f in files}
    edges = {}
    for f in files:
        mod = module_of(src, f)
        for t in targets(mod, strip_tests(f.read_text()), modules):
            # Ancestors and descendants are one unit; compare under the common parent.
            k = 0
            while k < min(len(mod), len(t)) and mod[k] == t[k]:
                k += 1
            if k == len(mod) or k == len(t):
                continue
            a, b = mod[: k + 1], t[: k + 1]
            edges.setdefault(a, set()).add(b)
    # Tarjan's strongly connected components.
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted("::".join(c) for c in comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    bad = 0
    for manifest in sorted(ROOT.glob("*/Cargo.toml")) + [ROOT / "Cargo.toml"]:
        src = manifest.parent / "src"
        if not src.is_dir():
            continue
        for comp in crate_cycles(src):
            bad += 1
            print(f"{manifest.parent.name}: modules import each other in a cycle: {', '.join(comp)}")
    if bad == 0:
        print("no module import cycle in any crate")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
