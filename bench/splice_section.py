"""Replaces the section between <!-- NAME:begin --> and <!-- NAME:end --> of a markdown
file with the text on stdin (appends it, with its markers, when they are not there yet).

Usage: python3 bench/splice_section.py FILE NAME < section.md
"""
import os
import re
import sys

path, name = sys.argv[1], sys.argv[2]
section = sys.stdin.read().rstrip()
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
block = begin + "\n" + section + "\n" + end
if begin in text:
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, text, flags=re.S)
else:
    text = text.rstrip() + "\n\n" + block + "\n"
open(path, "w").write(text)
