#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (lines from the opening to the closing brace).

Usage: tools/function_lengths.py [--max N] [PATH ...]   (default: --max 150 src)
Exits 1 when a function is over the limit and not listed in --allow FILE (one
`path:function` per line, # comments). A brace-matching scan, not a parser: good
enough for this tree's style (no macros that open bodies).
"""
import argparse
import os
import re
import sys

CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*(\(.*\))?\s*$", re.S)
SIGNATURE = re.compile(r"\)\s*(const|override|final|noexcept|mutable|&|&&|\s|->\s*[\w:<>,\s*&]+)*$", re.S)
NAME = re.compile(r"([~\w:]+(?:<[^()]*>)?|operator\s*[^\s(]+)\s*\($")


def strip(text):
    """Blanks comments, strings and char literals, keeping newlines."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == "'" and i > 0 and (text[i - 1].isalnum()) and i + 1 < n and text[i + 1].isalnum():
            out.append(c); i += 1  # a digit separator: 1'000
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def function_name(head):
    head = head.rstrip()
    depth, k = 0, len(head) - 1
    while k >= 0:  # find the '(' matching the last ')'
        if head[k] == ")":
            depth += 1
        elif head[k] == "(":
            depth -= 1
            if depth == 0:
                break
        k -= 1
    m = NAME.search(head[: k + 1]) if k >= 0 else None
    return m.group(1) if m else "?"


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    stack, last_stop = [], 0  # stack of (kind, line, name)
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";":
            if not any(k == "function" for k, _, _ in stack):
                last_stop = i + 1
        elif c == "{":
            inside = any(k == "function" for k, _, _ in stack)
            head = text[last_stop:i]
            kind = "block"
            if not inside:
                stripped = head.strip()
                # Constructor initializer lists: `) : a_(x), b_(y) {`
                init = re.search(r"\)\s*:\s*[\w:]+[({]", stripped)
                if init and re.search(r"[\w>]$", stripped):
                    stack.append(("member_init", line, ""))  # `y_{x}` in an initializer list
                    continue
                if re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", stripped) or \
                        stripped.startswith("extern"):
                    kind = "scope"
                elif (SIGNATURE.search(stripped) or init) and not CONTROL.search(stripped) \
                        and not stripped.endswith("]"):
                    kind = "function"
                    name_head = stripped[: init.start() + 1] if init else stripped
                    name_head = re.sub(r"\)\s*(const|override|final|noexcept|->.*)*$", ")",
                                       name_head, flags=re.S)
                    stack.append((kind, line, function_name(name_head)))
                    last_stop = i + 1
                    continue
                elif re.search(r"=\s*$", stripped) or stripped == "":
                    kind = "block"
            stack.append((kind, line, ""))
            last_stop = i + 1
        elif c == "}":
            kind = ""
            if stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    yield name, start, line
            if kind != "member_init" and not any(k == "function" for k, _, _ in stack):
                last_stop = i + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["src"])
    parser.add_argument("--max", type=int, default=150)
    parser.add_argument("--allow", help="file of path:function allowed over the limit")
    args = parser.parse_args()
    allowed = set()
    if args.allow:
        for row in open(args.allow):
            row = row.split("#")[0].strip()
            if row:
                allowed.add(row)
    files = []
    for root in args.paths:
        if os.path.isfile(root):
            files.append(root)
        for base, _, names in os.walk(root):
            files += [os.path.join(base, n) for n in names if n.endswith((".cc", ".h"))]
    over = []
    for path in sorted(files):
        for name, start, end in functions(path):
            length = end - start + 1
            if length > args.max:
                over.append((length, path, name, start))
    failed = False
    for length, path, name, start in sorted(over, reverse=True):
        mark = "allowed" if f"{path}:{name}" in allowed else "OVER"
        failed |= mark == "OVER"
        print(f"{length:5d}  {path}:{start}  {name}  {mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
