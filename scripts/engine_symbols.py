#!/usr/bin/env python3
"""Symbol tables of the engines' releases, for the Python hooks' default targets.

The default hooks (python/teller_hook/default_hooks.txt) name engine classes and methods,
and the adapters (teller_adapters.py) read fields of the objects those methods take or
return. Engines move them between releases. This script reads each release's sources
(git show + Python's ast on a bare mirror, nothing is imported or run) and keeps, per
release, only what the hooks and adapters touch: the hooked modules, their classes with
bases (followed through imports so inheritance resolves), methods (async or not, their
positional parameters) and the fields of the classes the adapters read.

  engine_symbols.py extract [--mirrors DIR] [RELEASE ...]
        writes tests/fixtures/engine_symbols/<engine>-<version>.json (all of RELEASES, or
        the named ones) from the mirrors of `fetch github:neuralmagic/vllm`,
        `github:bytedance-iaas/vllm`, `github:bytedance-iaas/sglang` (/work/.mirror).
  engine_symbols.py --markdown      prints the table by release (docs/capture.md)
  engine_symbols.py --write-docs    replaces that table in docs/capture.md
  engine_symbols.py --check         exit 1 and say why when a claim does not hold

A default hook line may end in a claim, `# vllm 0.8.2+` or `# sglang 0.3.0-0.3.2`: the
releases (of the fixtures) where it must resolve, adapter fields included. The checks
(tests/python_hooks/engine_symbols_test.py runs them on the fixtures, no mirror needed):
every default hook has a claim; a claimed release resolves the hook, its adapter's
argument and fields; on the newest release of each engine every STEP hook with an open
claim (`X+`, the serve path) resolves and no hook would be reported as not attached
(its module present, its target not, and the line not `?`-marked).
"""

import argparse
import ast
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOOK_DIR = os.path.join(ROOT, "python", "teller_hook")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "engine_symbols")
DOCS = os.path.join(ROOT, "docs", "capture.md")
sys.path.insert(0, HOOK_DIR)

import teller_adapters  # noqa: E402
import teller_hooks  # noqa: E402

# (engine, version label, mirror, git ref, where the label comes from). Labels of
# branches are the release the branch carries; `main` snapshots sort after every release.
RELEASES = [
    ("vllm", "0.6.0", "neuralmagic+vllm", "v0.6.0", "tag"),
    ("vllm", "0.6.6", "neuralmagic+vllm", "v0.6.6", "tag (first V1 engine, opt-in)"),
    ("vllm", "0.7.3", "neuralmagic+vllm", "v0.7.3", "tag"),
    ("vllm", "0.8.0", "neuralmagic+vllm", "v0.8.0", "tag (V1 by default)"),
    ("vllm", "0.8.5", "neuralmagic+vllm", "v0.8.5", "tag"),
    ("vllm", "0.9.2", "neuralmagic+vllm", "v0.9.2", "tag"),
    ("vllm", "0.10.1.1", "bytedance-iaas+vllm", "v0.10.1.1", "tag"),
    ("vllm", "0.11.2.dev", "neuralmagic+vllm", "llm-d-release-0.4",
     "branch llm-d-release-0.4: upstream main of 2025-11-20, between 0.11.1 and 0.12.0"),
    ("vllm", "0.19.1", "neuralmagic+vllm", "v0.19.1-llm-d-0.7-cherrypicks",
     "branch v0.19.1-llm-d-0.7-cherrypicks: 0.19.1 and bug-fix cherry-picks"),
    ("vllm", "0.23.0", "neuralmagic+vllm", "upstream-v0.23.0", "branch upstream-v0.23.0"),
    ("vllm", "main-2026-08-17", "neuralmagic+vllm", "main", "branch main of 2026-08-17"),
    ("sglang", "0.3.0", "bytedance-iaas+sglang", "v0.3.0", "tag"),
    ("sglang", "0.3.2", "bytedance-iaas+sglang", "v0.3.2", "tag (last with ModelTpServer)"),
    ("sglang", "0.3.3", "bytedance-iaas+sglang", "v0.3.3", "tag (first Scheduler)"),
    ("sglang", "0.4.0", "bytedance-iaas+sglang", "v0.4.0", "tag"),
    ("sglang", "0.4.10", "bytedance-iaas+sglang", "v0.4.10", "tag"),
    ("sglang", "0.5.5", "bytedance-iaas+sglang", "v0.5.5", "tag"),
    ("sglang", "0.5.18", "bytedance-iaas+sglang", "v0.5.18", "tag (newest)"),
]

PACKAGE_DIRS = {"vllm": ["vllm"], "sglang": ["python/sglang", "sglang"]}


def version_key(label):
    """Sort key of a version label: 0.10.1.1 > 0.9.2; `0.11.2.dev` is before 0.11.2;
    `main-...` after every release."""
    if label.startswith("main"):
        return (10 ** 6,) + (0,) * 5
    key = [int(part) if part.isdigit() else -1 for part in label.split(".")]
    return tuple(key + [0] * (6 - len(key)))


def in_claim(label, claim):
    """claim: `A+` (A and later) or `A-B` (A to B; B=0.10 covers 0.10.x)."""
    key = version_key(label)
    if claim.endswith("+"):
        return key >= version_key(claim[:-1])
    low, _, high = claim.partition("-")
    parts = len(high.split("."))
    return version_key(low) <= key and key[:parts] <= version_key(high)[:parts]


# ---- the default hooks and their claims ----

class DefaultHook:
    def __init__(self, spec, engine, claim, line):
        self.spec = spec
        self.engine = engine
        self.claim = claim
        self.line = line

    @property
    def target(self):
        return "%s:%s" % (self.spec.module, self.spec.qualname)

    @property
    def layer(self):
        return {v: k for k, v in teller_hooks.LAYERS.items()}[self.spec.layer]

    @property
    def open_claim(self):
        return self.claim is not None and self.claim.endswith("+")

    def adapter(self):
        if not self.spec.adapter:
            return None
        return teller_adapters.get(self.spec.adapter, self.spec.adapter_args)


CLAIM = re.compile(r"#\s*(vllm|sglang)\s+(\d[\w.]*(?:\+|-\d[\w.]*))\s*(?:$|[;(])")


def default_hooks(path=None):
    path = path or os.path.join(HOOK_DIR, "default_hooks.txt")
    hooks = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            body, _, comment = raw.partition("#")
            if not body.strip():
                continue
            specs = teller_hooks.parse_hooks(body, "default_hooks.txt")
            if len(specs) != 1:
                raise SystemExit("default_hooks.txt:%d: not one hook: %r" % (number, raw))
            match = CLAIM.search("#" + comment) if comment else None
            engine = match.group(1) if match else specs[0].module.split(".")[0]
            hooks.append(DefaultHook(specs[0], engine, match.group(2) if match else None,
                                     number))
    return hooks


def adapter_needs():
    """{class name: set of fields} over every adapter of the default hooks."""
    needs = {}
    for hook in default_hooks():
        adapter = hook.adapter()
        for read in getattr(adapter, "reads", ()) + getattr(adapter, "tells_apart", ()):
            cls, _, fields = read.partition(".")
            needs.setdefault(cls, set()).update(fields.split("|"))
    return needs


# ---- extraction from a mirror ----

class Source:
    def __init__(self, git_dir, ref, engine):
        self.git_dir, self.ref, self.engine = git_dir, ref, engine
        self.commit = self._git("rev-parse", ref + "^{commit}").strip()
        self._trees = {}

    def _git(self, *args):
        return subprocess.run(["git", "--git-dir", self.git_dir] + list(args), check=True,
                              capture_output=True, text=True).stdout

    def module_file(self, module):
        """The path of module's source at ref, or None."""
        rel = module.replace(".", "/")
        for base in PACKAGE_DIRS[self.engine]:
            prefix = base[:-len(self.engine)] if base.endswith(self.engine) else base
            for path in (prefix + rel + ".py", prefix + rel + "/__init__.py"):
                if self.exists(path):
                    return path
        return None

    def exists(self, path):
        folder, _, name = path.rpartition("/")
        if folder not in self._trees:
            try:
                out = self._git("ls-tree", "--name-only", self.commit + ":" + folder)
                self._trees[folder] = set(out.split())
            except subprocess.CalledProcessError:
                self._trees[folder] = set()
        return name in self._trees[folder]

    def read(self, path):
        return self._git("show", self.commit + ":" + path)

    def files_defining(self, cls):
        """Modules of the package with a top-level `class cls`."""
        pattern = r"^class %s\b" % re.escape(cls)
        dirs = [d for d in PACKAGE_DIRS[self.engine] if self._tree_has(d)]
        try:
            out = self._git("grep", "-l", "-E", pattern, self.commit, "--", *dirs)
        except subprocess.CalledProcessError:
            return []
        modules = []
        for line in out.splitlines():
            path = line.split(":", 1)[1]
            if not path.endswith(".py"):
                continue
            module = path[:-3].replace("/", ".")
            if module.startswith("python."):
                module = module[len("python."):]
            if module.endswith(".__init__"):
                module = module[:-len(".__init__")]
            modules.append(module)
        return sorted(modules)

    def _tree_has(self, folder):
        parent, _, name = folder.rpartition("/")
        return self.exists(folder) if parent else name in self._root()

    def _root(self):
        if "" not in self._trees:
            self._trees[""] = set(self._git("ls-tree", "--name-only", self.commit).split())
        return self._trees[""]


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return inner + "." + node.attr if inner else None
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[...]
        return _dotted(node.value)
    if isinstance(node, ast.Call):
        return None
    return None


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level(body):
    """Statements run at import (into if/try, not into TYPE_CHECKING blocks)."""
    for node in body:
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
        else:
            yield node


class ParsedModule:
    def __init__(self, name, text):
        self.name = name
        self.tree = ast.parse(text)
        self.classes = {}
        self.imports = {}  # local name -> (module, name or None for a module)
        package = name.rpartition(".")[0]  # a package's __init__ comes as pkg.__init__
        for node in _top_level(self.tree.body):
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (base, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = (alias.name, None)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
                for target in node.targets:
                    if isinstance(target, ast.Name) and node.value.id != target.id:
                        self.imports[target.id] = (name, node.value.id)  # an alias


def _methods_and_fields(node):
    methods, fields = {}, set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = [_dotted(d.func if isinstance(d, ast.Call) else d) for d in
                          item.decorator_list]
            params = [a.arg for a in item.args.posonlyargs + item.args.args]
            info = {"async": isinstance(item, ast.AsyncFunctionDef), "args": params}
            if "property" in decorators or any(d and d.endswith(".setter") for d in decorators):
                info["property"] = True
            if "staticmethod" in decorators:
                info["static"] = True
            if "classmethod" in decorators:
                info["classmethod"] = True
            if item.name not in methods or not methods[item.name].get("property"):
                methods[item.name] = info
            for sub in ast.walk(item):
                targets = []
                if isinstance(sub, ast.Assign):
                    targets = sub.targets
                elif isinstance(sub, (ast.AnnAssign, ast.AugAssign)):
                    targets = [sub.target]
                for target in targets:
                    for t in ast.walk(target):
                        if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id == "self"):
                            fields.add(t.attr)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            fields.add(item.target.id)
        elif isinstance(item, ast.Assign):
            for target in item.targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Name):
                        fields.add(t.id)
    return methods, fields


class Extractor:
    def __init__(self, source, needs, members):
        self.source = source
        self.needs = needs  # {class name: fields the adapters read}
        self.members = members  # method and field names worth keeping
        self.parsed = {}
        self.out = {}  # module -> {"classes": {...}, "names": {...}}

    def parse(self, module):
        if module not in self.parsed:
            path = self.source.module_file(module)
            if path is None:
                self.parsed[module] = None
            else:
                text = self.source.read(path)
                parsed = ParsedModule(module if not path.endswith("__init__.py")
                                      else module + ".__init__", text)
                parsed.name = module
                self.parsed[module] = parsed
        return self.parsed[module]

    def entry(self, module):
        return self.out.setdefault(module, {"classes": {}, "names": {}})

    def add_name(self, module, name, depth=0):
        """Records what `module.name` is (a class here, or where an import leads)."""
        parsed = self.parse(module)
        if parsed is None or depth > 8:
            return
        entry = self.entry(module)
        if name in parsed.classes:
            self.add_class(module, name, depth)
        elif name in parsed.imports:
            target_module, target_name = parsed.imports[name]
            if target_name is None:  # import pkg.mod as name
                entry["names"][name] = target_module + ":"
                return
            if not target_module.startswith(self.source.engine):
                entry["names"][name] = "%s:%s" % (target_module, target_name)
                return
            # `from pkg import mod` imports a module when pkg has no such name.
            target = self.parse(target_module)
            if (target is not None and target_name not in target.classes
                    and target_name not in target.imports
                    and self.parse(target_module + "." + target_name) is not None):
                entry["names"][name] = "%s.%s:" % (target_module, target_name)
                return
            if target is None and self.parse(target_module + "." + target_name) is not None:
                entry["names"][name] = "%s.%s:" % (target_module, target_name)
                return
            entry["names"][name] = "%s:%s" % (target_module, target_name)
            self.add_name(target_module, target_name, depth + 1)

    def add_class(self, module, name, depth=0):
        entry = self.entry(module)
        if name in entry["classes"]:
            return
        node = self.parse(module).classes[name]
        methods, fields = _methods_and_fields(node)
        # Only what a hook or an adapter names: the tables stay small.
        methods = {m: info for m, info in methods.items() if m in self.members}
        bases = []
        entry["classes"][name] = {"bases": bases, "methods": methods,
                                  "fields": sorted(fields & self.members)}
        for base in node.bases:
            dotted = _dotted(base)
            if dotted is None:
                continue
            bases.append(dotted)
            head, _, rest = dotted.partition(".")
            self.add_name(module, head, depth + 1)
            target = entry.get("names", {}).get(head, "")
            if rest and target.endswith(":"):  # mod.Class with mod an imported module
                self.add_name(target[:-1], rest, depth + 1)

    def run(self, hooks):
        for hook in hooks:
            if self.source.engine != hook.engine:
                continue
            head = hook.spec.qualname.split(".")[0]
            if self.parse(hook.spec.module) is not None:
                self.add_name(hook.spec.module, head)
        for cls in sorted(self.needs):
            for module in self.source.files_defining(cls):
                if self.parse(module) is not None and cls in self.parse(module).classes:
                    self.add_class(module, cls)
        for module in list(self.out):
            entry = self.out[module]
            if not entry["names"]:
                del entry["names"]
        return {module: self.out[module] for module in sorted(self.out)}


def extract(release, mirrors):
    engine, label, mirror, ref, note = release
    source = Source(os.path.join(mirrors, mirror, "repo"), ref, engine)
    hooks = default_hooks()
    needs = {cls: fields for cls, fields in adapter_needs().items()}
    members = set().union(*needs.values()) | {h.spec.qualname.split(".")[-1] for h in hooks}
    modules = Extractor(source, needs, members).run(hooks)
    return {
        "engine": engine,
        "version": label,
        "source": "github:%s@%s (%s), commit %s" % (mirror.replace("+", "/"), ref, note,
                                                    source.commit),
        "modules": modules,
    }


def fixture_path(engine, label):
    return os.path.join(FIXTURES, "%s-%s.json" % (engine, label))


def _compact_json(data):
    """Indented JSON with short lists and leaf objects on one line."""
    text = json.dumps(data, indent=1, sort_keys=True)
    text = re.sub(r"\[\s*\]", "[]", text)
    text = re.sub(r"\[\n\s*([^\[\]{}]*?)\n\s*\]",
                  lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]", text)
    text = re.sub(r"\{\n((?: *[^\n{}]*\n)*?) *\}",
                  lambda m: "{" + re.sub(r",\n\s*", ", ", m.group(1).strip()) + "}", text)
    return text


def write_fixture(data):
    os.makedirs(FIXTURES, exist_ok=True)
    with open(fixture_path(data["engine"], data["version"]), "w") as f:
        f.write(_compact_json(data) + "\n")


# ---- resolution on a symbol table ----

class Table:
    """One release's symbol table (a fixture)."""

    def __init__(self, data):
        self.engine = data["engine"]
        self.version = data["version"]
        self.modules = data["modules"]

    @staticmethod
    def load(path):
        with open(path) as f:
            return Table(json.load(f))

    def has_module(self, module):
        return module in self.modules

    def lookup(self, module, name, depth=0):
        """(module, class) that module.name is, or None."""
        entry = self.modules.get(module)
        if entry is None or depth > 8:
            return None
        if name in entry["classes"]:
            return module, name
        target = entry.get("names", {}).get(name)
        if target is None:
            return None
        target_module, _, target_name = target.partition(":")
        return self.lookup(target_module, target_name, depth + 1) if target_name else None

    def mro(self, module, cls):
        """(module, class, info) of cls and its resolvable bases, depth first."""
        seen, out = set(), []

        def walk(where, depth):
            if where is None or where in seen or depth > 16:
                return
            seen.add(where)
            info = self.modules[where[0]]["classes"][where[1]]
            out.append((where[0], where[1], info))
            for base in info["bases"]:
                if "." in base:
                    head, rest = base.split(".", 1)
                    target = self.modules[where[0]].get("names", {}).get(head, "")
                    if target.endswith(":"):  # mod.Class with mod an imported module
                        walk(self.lookup(target[:-1], rest), depth + 1)
                else:
                    walk(self.lookup(where[0], base), depth + 1)

        walk((module, cls), 0)
        return out

    def resolve(self, module, qualname):
        """(method info, None) when module:qualname names a method or attribute, else
        (None, why)."""
        if module not in self.modules:
            return None, "module %s absent" % module
        parts = qualname.split(".")
        where = self.lookup(module, parts[0])
        if where is None:
            return None, "module has no class %r" % parts[0]
        if len(parts) == 1:
            return {"class": True}, None
        attr = parts[1]
        for _, cls, info in self.mro(*where):
            if attr in info["methods"]:
                return info["methods"][attr], None
        return None, "%s has no attribute %r" % (parts[0], attr)

    def has_field(self, cls, fields):
        """Whether some class named cls has one of fields (methods and inherited count)."""
        for module, entry in self.modules.items():
            if cls not in entry["classes"]:
                continue
            for _, _, info in self.mro(module, cls):
                if any(f in info["fields"] or f in info["methods"] for f in fields):
                    return True
        return False


def load_tables(folder=FIXTURES):
    tables = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            tables.append(Table.load(os.path.join(folder, name)))
    tables.sort(key=lambda t: (t.engine, version_key(t.version)))
    return tables


# ---- checks ----

def hook_state(table, hook):
    """'ok' | 'absent' (module not in the release: skipped silently) | 'reported' (module
    present, target missing: the hooks say so) | 'quiet' (same, `?` line) |
    'fields' (resolves, but its adapter's argument or fields do not)."""
    info, why = table.resolve(hook.spec.module, hook.spec.qualname)
    if info is None:
        if not table.has_module(hook.spec.module):
            return "absent", why
        return ("quiet" if hook.spec.optional else "reported"), why
    problems = adapter_problems(table, hook, info)
    if problems:
        return "fields", "; ".join(problems)
    return "ok", None


def adapter_problems(table, hook, info):
    adapter = hook.adapter()
    if adapter is None:
        return []
    problems = []
    for index, name in getattr(adapter, "reads_args", ()):
        params = info.get("args", [])
        if len(params) <= index or params[index] != name:
            problems.append("parameter %d of %s is %r, the adapter reads %r" % (
                index, hook.spec.qualname, params[index] if len(params) > index else None, name))
    for read in getattr(adapter, "reads", ()):
        cls, _, fields = read.partition(".")
        if not table.has_field(cls, fields.split("|")):
            problems.append("no %s with %s" % (cls, " or ".join(fields.split("|"))))
    return problems


def check(tables, hooks):
    """Problems, as sentences; empty when every claim holds."""
    problems = []
    engines = sorted({t.engine for t in tables})
    for hook in hooks:
        if hook.claim is None:
            problems.append("default_hooks.txt:%d: %s has no claim (`# %s X+` or `# %s A-B`)"
                            % (hook.line, hook.target, hook.engine, hook.engine))
    for table in tables:
        for hook in hooks:
            if hook.engine != table.engine or hook.claim is None:
                continue
            if in_claim(table.version, hook.claim):
                state, why = hook_state(table, hook)
                if state != "ok":
                    problems.append("%s %s: %s (claimed %s) does not resolve: %s" % (
                        table.engine, table.version, hook.target, hook.claim, why))
    for engine in engines:
        newest = [t for t in tables if t.engine == engine][-1]
        serve = [h for h in hooks if h.engine == engine and h.layer == "STEP" and h.open_claim]
        if not serve:
            problems.append("%s: no STEP hook claims the newest releases" % engine)
        for hook in hooks:
            if hook.engine != engine:
                continue
            state, why = hook_state(newest, hook)
            if hook in serve and state != "ok":
                problems.append("%s %s (newest): serve-path STEP hook %s does not resolve: %s"
                                % (engine, newest.version, hook.target, why))
            elif state == "reported":
                problems.append("%s %s (newest): %s would be reported as not attached (%s); "
                                "mark the line `?` or move it" % (engine, newest.version,
                                                                   hook.target, why))
    return problems


# ---- the table by release ----

CELL = {"ok": "yes", "absent": "-", "reported": "no (said)", "quiet": "no", "fields": "fields!"}


def markdown(tables, hooks):
    out = ["Generated by `scripts/engine_symbols.py --write-docs` from the symbol tables in "
           "`tests/fixtures/engine_symbols/` and the claims in `default_hooks.txt`. yes: the "
           "target resolves (async: a coroutine, given the async wrapper), with its adapter's "
           "parameters and fields; (yes): it resolves outside its claim; -: module absent (skipped silently); no: target absent, "
           "a `?` line (not reported); no (said): module present, target absent, reported "
           "as not attached; fields!: resolves, but not what its adapter reads.", ""]
    for engine in sorted({t.engine for t in tables}, reverse=True):
        rows = [t for t in tables if t.engine == engine]
        head = ["hook", "layer", "claim"] + [t.version for t in rows]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for hook in hooks:
            if hook.engine != engine:
                continue
            name = ("?" if hook.spec.optional else "") + hook.target
            adapter = hook.spec.adapter
            cells = ["`%s`%s" % (name, " (%s)" % adapter if adapter else ""), hook.layer,
                     hook.claim or "none"]
            for table in rows:
                state, _ = hook_state(table, hook)
                cell = CELL[state]
                if state == "ok":
                    info, _ = table.resolve(hook.spec.module, hook.spec.qualname)
                    if info.get("async"):
                        cell = "async"
                    if hook.claim and not in_claim(table.version, hook.claim):
                        cell = "(%s)" % cell
                cells.append(cell)
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    notes = [note_of(t) for t in tables]
    out.append("Releases are tags `v<version>` except: " +
               "; ".join(n for n in notes if n) + ".")
    return "\n".join(out).rstrip() + "\n"


def note_of(table):
    for engine, label, mirror, ref, note in RELEASES:
        if engine == table.engine and label == table.version and ref != "v" + label:
            return "%s %s: %s" % (engine, label, note)
    return ""


DOC_BEGIN, DOC_END = "<!-- engine_symbols:begin -->", "<!-- engine_symbols:end -->"


def doc_block(path=DOCS):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if DOC_BEGIN not in text or DOC_END not in text:
        return None
    return text.split(DOC_BEGIN, 1)[1].split(DOC_END, 1)[0].strip("\n") + "\n"


def write_docs(block, path=DOCS):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head, rest = text.split(DOC_BEGIN, 1)
    _, tail = rest.split(DOC_END, 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + DOC_BEGIN + "\n" + block + DOC_END + tail)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=["extract"])
    parser.add_argument("releases", nargs="*", help="engine-version labels, e.g. vllm-0.6.0")
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "extract":
        chosen = [r for r in RELEASES
                  if not args.releases or "%s-%s" % (r[0], r[1]) in args.releases]
        for release in chosen:
            data = extract(release, args.mirrors)
            write_fixture(data)
            print("wrote %s" % os.path.relpath(fixture_path(release[0], release[1]), ROOT))
    hooks = default_hooks()
    tables = load_tables()
    if args.markdown:
        sys.stdout.write(markdown(tables, hooks))
    if args.write_docs:
        write_docs(markdown(tables, hooks))
    if args.check:
        problems = check(tables, hooks)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
