#!/usr/bin/env python3
"""Circles between a crate's rooms: every edge `use crate::…` / `super::…` / `self::…` (and
such paths in code) from one source file to another, following re-exports to the file that
defines the item, and the cycles among them.

    scripts/module_cycles.py CRATE_SRC...      e.g. scripts/module_cycles.py src breaker-runtime/src

A file and the files of its own submodules are one family: a cycle that stays inside one
family (a `mod.rs` naming its children's items, a child naming its parent's: one type's
`impl` split into rooms) is not a circle. Any cycle through another room is printed with its
edges, and the exit status is 1. Test code is left out:
`tests` modules, and a file's tail from its first `#[cfg(…test…)] mod` on (the convention
here). Regex-based, not a parser: a path in a string or a macro may count.
"""
import os, re, sys

def modpath(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ('lib', 'main', 'mod'):
        rel = rel[:-1]
    return rel

def expand(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.strip()
    m = re.match(r'^(.*?)\{(.*)\}$', tree, re.S)
    if not m:
        return [tree]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ''
    for ch in inner:
        if ch == ',' and depth == 0:
            parts.append(cur); cur = ''
            continue
        depth += ch == '{'
        depth -= ch == '}'
        cur += ch
    parts.append(cur)
    return [prefix + q for p in parts if p.strip() for q in expand(p)]

def clean(tree):
    """A use tree without whitespace but around `as`."""
    return re.sub(r'\s+', '', re.sub(r'\s+as\s+', '@', tree)).replace('@', ' as ')

def strip_tests(text):
    m = re.search(r'#\[cfg\([^\]]*\btest\b[^\]]*\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{', text)
    text = text[:m.start()] if m else text
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'pub\(in [^)]*\)', 'pub', text)
    text = re.sub(r'pub\(in [^)]*\)', 'pub', text)
    return text

def refs(text):
    out = []
    for u in re.finditer(r'\buse\s+([^;]+);', text):
        out += [re.sub(r'\s+as\s+\w+$', '', p.strip()) for p in expand(clean(u.group(1)))]
    out += re.findall(r'(?<![:\w])((?:crate|super|self)(?:::\w+)+)', text)
    return out

def resolve(mod, path, is_dir_mod):
    segs = path.split('::')
    if segs[0] == 'crate':
        return segs[1:]
    base = list(mod)
    while segs and segs[0] in ('super', 'self'):
        if segs[0] == 'super':
            base = base[:-1]
        segs = segs[1:]
    return base + segs

def reexports_of(root, files):
    """(module…, name) -> the full path a `mod.rs`/`lib.rs` re-exports under that name."""
    out = {}
    for f in files:
        if os.path.basename(f) not in ('lib.rs', 'main.rs', 'mod.rs'):
            continue
        mod = modpath(root, f)
        text = strip_tests(open(f, encoding='utf-8').read())
        for u in re.finditer(r'\buse\s+([^;]+);', text):
            for p in expand(clean(u.group(1))):
                p = p.strip()
                alias = re.search(r'\s+as\s+(\w+)$', p)
                p = re.sub(r'\s+as\s+\w+$', '', p)
                first = p.split('::')[0]
                full = resolve(mod, p, True) if first in ('crate', 'self', 'super') else mod + p.split('::')
                if full[:len(mod)] == mod and len(full) > len(mod) + 1:
                    out[tuple(mod) + ((alias.group(1) if alias else full[-1]),)] = full
    return out

def sccs(edges):
    index, low, stack, on, comps, i = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)
    for v in list(edges):
        if v not in index:
            visit(v)
    return comps

def check(root):
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith('.rs')]
    mods = {tuple(modpath(root, f)) for f in files}
    reexports = reexports_of(root, files)

    def home(target):
        for _ in range(8):  # a re-export of a re-export
            for k in range(len(target), 0, -1):
                key = tuple(target[:k])
                # `registry::index::…` is the module, not the fn `registry` re-exported at the root.
                if key in reexports and reexports[key] != target[:k] and not (k < len(target) and key in mods):
                    target = reexports[key] + target[k:]
                    break
            else:
                break
        for k in range(len(target), -1, -1):
            if tuple(target[:k]) in mods:
                return tuple(target[:k])

    edges = {}
    for f in files:
        mod = tuple(modpath(root, f))
        if 'tests' in mod:
            continue
        text = strip_tests(open(f, encoding='utf-8').read())
        for r in refs(text):
            h = home(resolve(list(mod), r, False))
            if h not in (None, (), mod) and 'tests' not in h:
                edges.setdefault(mod, set()).add(h)
    # A cycle inside one family (every file under one of them) is the family's own business.
    comps = [c for c in sccs(edges) if not any(all(x[:len(r)] == r for x in c) for r in c)]
    print(f"{root}: {len(mods)} files, {sum(len(v) for v in edges.values())} edges between files")
    for c in comps:
        print("  cycle:", ', '.join(sorted('::'.join(x) for x in c)))
        for a in sorted(c):
            for b in sorted(edges.get(a, set()) & set(c)):
                print(f"    {'::'.join(a)} -> {'::'.join(b)}")
    if not comps:
        print("  no cycles")
    return not comps

sys.setrecursionlimit(10000)
ok = all([check(root) for root in sys.argv[1:]])
sys.exit(0 if ok else 1)
