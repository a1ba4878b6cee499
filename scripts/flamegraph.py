#!/usr/bin/env python3
"""Turns `go tool pprof -traces` output (stdin) into a flame-graph SVG (stdout).

Each trace block of -traces is a value line ("  10ms  leaf" or "  512  leaf")
followed by the rest of its stack, leaf first; blocks are separated by lines of
dashes. Frames are merged into a tree from the root; each box's width is its
share of the total. Usage: go tool pprof -traces BIN PROF | flamegraph.py TITLE
"""
import html
import re
import sys

UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "hrs": 3600.0}


def value(tok):
    m = re.fullmatch(r"([0-9.]+)([a-zµ]*)", tok)
    if not m:
        return None
    n, u = float(m.group(1)), m.group(2)
    if u in UNITS:
        return n * UNITS[u]
    if u in ("", "B"):
        return n
    mult = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "k": 1e3, "M": 1e6}.get(u)
    return n * mult if mult else None


def parse(lines):
    stacks, cur, val = [], [], None
    for line in lines:
        if line.startswith("-----------+"):
            if val is not None and cur:
                stacks.append((val, cur[::-1]))
            cur, val = [], None
            continue
        f = line.split()
        if not f or line.startswith(("File:", "Type:", "Time:", "Duration:", "Build ID:")):
            continue
        if val is None and len(f) >= 2 and value(f[0]) is not None and not line.startswith("  " * 8):
            val = value(f[0])
            cur.append(" ".join(f[1:]))
        elif val is not None:
            cur.append(" ".join(f))
    if val is not None and cur:
        stacks.append((val, cur[::-1]))
    return stacks


def tree(stacks):
    root = {"n": "all", "v": 0.0, "c": {}}
    for v, st in stacks:
        root["v"] += v
        node = root
        for fr in st:
            node = node["c"].setdefault(fr, {"n": fr, "v": 0.0, "c": {}})
            node["v"] += v
    return root


def depth(node):
    return 1 + max((depth(c) for c in node["c"].values()), default=0)


def color(name):
    h = sum(map(ord, name)) % 60
    return f"rgb({205 + h % 50},{80 + h * 2},{40 + h})"


def main():
    title = sys.argv[1] if len(sys.argv) > 1 else "flame graph"
    root = tree(parse(sys.stdin))
    W, H = 1800, 16
    rows = depth(root)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{(rows + 2) * H}" '
           f'font-family="monospace" font-size="11">',
           f'<text x="4" y="12">{html.escape(title)} (width = share of samples; hover for figures)</text>']
    total = root["v"] or 1.0

    def draw(node, x, d):
        w = node["v"] / total * W
        if w < 0.3:
            return
        y = (rows - d) * H + H
        label = html.escape(node["n"])
        pct = 100 * node["v"] / total
        out.append(f'<g><title>{label} ({pct:.2f}%)</title>'
                   f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{H - 1}" fill="{color(node["n"])}"/>')
        chars = int(w / 7)
        if chars > 3:
            short = node["n"] if len(node["n"]) <= chars else node["n"][: chars - 2] + ".."
            out.append(f'<text x="{x + 2:.2f}" y="{y + H - 4}">{html.escape(short)}</text>')
        out.append("</g>")
        cx = x
        for c in sorted(node["c"].values(), key=lambda c: c["n"]):
            draw(c, cx, d + 1)
            cx += c["v"] / total * W

    draw(root, 0.0, 0)
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
