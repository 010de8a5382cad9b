"""One section of a generated doc (docs/results.md): the text between
<!-- NAME:begin --> and <!-- NAME:end -->, replaced in place, or appended under a heading
the first time. Used by the scripts that write figures into the docs."""


def write_section(path, name, heading, block):
    try:
        text = open(path).read()
    except FileNotFoundError:
        text = "# Results\n"
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        text = text.rstrip() + f"\n\n## {heading}\n\n" + begin + "\n" + end + "\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + block + "\n" + end + tail)
