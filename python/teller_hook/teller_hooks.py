"""teller's Python hooks (standard library only).

A meta-path finder wraps the functions a hooks file lists when their modules are
imported; each call becomes a complete host range written by libteller_capture.so
(TELLER_CAPTURE_LIB) into this process's bundle folder. STEP wrappers also write the
step index, the phase and the request ids of the batch (teller_adapters says where
each engine keeps them). Without the library, or outside `teller record`, nothing is
installed. A module never imported is skipped; a missing target of an imported one is
reported (stderr and the bundle's notes); a failing adapter never breaks
the call it wraps.

Hooks file: one `module:qualname:LAYER[:adapter[=arg,arg]]` per line, `#` comments,
`@default` includes the default list (default_hooks.txt). A line starting with `?` names a
target that only some releases of its engine have: missing, it is not reported.
"""

import atexit
import contextvars
import ctypes
import importlib.abc
import inspect
import itertools
import os
import sys
import threading
import time

import teller_adapters

LAYERS = {"STEP": 1, "FE": 2, "BE": 3, "RT": 4, "DRV": 5, "K": 6, "MEM": 7, "COMM": 8,
          "SYNC": 9, "OTHER": 10}
STEP = LAYERS["STEP"]
COMM = LAYERS["COMM"]
FE = LAYERS["FE"]

_native = None
_tls = threading.local()
_now = time.monotonic_ns  # CLOCK_MONOTONIC, the clock of host records
_installed = False
# The batch cell of the async STEP open in this asyncio task (a one-item list), or None.
# A coroutine step is suspended while other tasks of its event loop run on the same
# thread, so its state cannot live in _tls: each task sees its own context.
_async_step = contextvars.ContextVar("teller_async_step", default=None)
_wrapped = []  # (module, qualname) actually wrapped, for tests and debugging
_targets = {}  # module -> [HookSpec], what install() was asked for
_misses = {}  # (module, qualname) -> why it did not attach, once reported
# The step index of STEP ranges: one counter per process, shared by every STEP function,
# so an engine whose step is two functions (SGLang 0.3's prefill and decode batches)
# numbers its steps once. Wrappers bind it when made (tests replace it before).
_step_counter = itertools.count()


class HookSpec:
    __slots__ = ("module", "qualname", "layer", "adapter", "adapter_args", "optional")

    def __init__(self, module, qualname, layer, adapter=None, adapter_args=(),
                 optional=False):
        self.module = module
        self.qualname = qualname
        self.layer = layer
        self.adapter = adapter
        self.adapter_args = tuple(adapter_args)
        self.optional = optional  # `?module:...`: absent in some releases, not reported


def _warn(message):
    # Once per recording: child processes inherit the marker and stay quiet.
    if os.environ.get("TELLER_HOOKS_WARNED") == message:
        return
    sys.stderr.write("teller: %s\n" % message)
    os.environ["TELLER_HOOKS_WARNED"] = message


def parse_hooks(text, source="<hooks>", seen=None):
    """Parses a hooks file's text into HookSpecs; bad lines are reported and skipped."""
    specs = []
    seen = set() if seen is None else seen
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line == "@default":
            if "@default" not in seen:
                seen.add("@default")
                specs.extend(parse_hooks(_read(_default_hooks_path()), "default_hooks.txt", seen))
            continue
        optional = line.startswith("?")
        parts = line[1:].lstrip().split(":") if optional else line.split(":")
        if len(parts) < 3 or len(parts) > 4 or parts[2] not in LAYERS or not parts[0] or not parts[1]:
            _warn("%s:%d: expected [?]module:qualname:LAYER[:adapter], got %r" %
                  (source, number, raw))
            continue
        adapter, args = None, ()
        if len(parts) == 4 and parts[3]:
            name, _, arg_text = parts[3].partition("=")
            adapter = name
            args = [a for a in arg_text.split(",") if a]
        specs.append(HookSpec(parts[0], parts[1], LAYERS[parts[2]], adapter, args, optional))
    return specs


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _default_hooks_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "default_hooks.txt")


class _Native:
    """The C API of libteller_capture.so (capture/capture_api.h)."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        i64, c_int, c_char_p = ctypes.c_int64, ctypes.c_int, ctypes.c_char_p
        lib.teller_capture_active.restype = c_int
        lib.teller_capture_active.argtypes = []
        lib.teller_host_range.restype = None
        lib.teller_host_range.argtypes = [c_int, c_char_p, i64, i64, i64, c_char_p, c_char_p]
        lib.teller_name_thread.restype = None
        lib.teller_name_thread.argtypes = [c_char_p]
        lib.teller_mark.restype = None
        lib.teller_mark.argtypes = [c_char_p]
        lib.teller_flush.restype = None
        lib.teller_flush.argtypes = []
        lib.teller_shutdown.restype = None
        lib.teller_shutdown.argtypes = [c_int]
        self.lib = lib
        self.host_range = lib.teller_host_range
        # Older libraries lack them; collectives are then complete ranges, seen on return.
        self.range_push = getattr(lib, "teller_range_push", None)
        self.range_pop = getattr(lib, "teller_range_pop", None)
        if self.range_push is not None and self.range_pop is not None:
            self.range_push.restype = None
            self.range_push.argtypes = [c_char_p, c_int]
            self.range_pop.restype = None
            self.range_pop.argtypes = []
        else:
            self.range_push = None
        self.mark = lib.teller_mark
        # Older libraries lack it; a hook that did not attach is then a mark in the trace.
        self.note = getattr(lib, "teller_note", None)
        if self.note is not None:
            self.note.restype = None
            self.note.argtypes = [c_char_p]
        # Older libraries lack it; the watch mode's hang trigger then sees NVTX only.
        self.step_begin = getattr(lib, "teller_step_begin", None)
        if self.step_begin is not None:
            self.step_begin.restype = None
            self.step_begin.argtypes = []
        else:
            self.step_begin = lambda: None
        # Older libraries lack it; ranks then come from the launcher's variables only.
        self.process_group = getattr(lib, "teller_process_group", None)
        if self.process_group is not None:
            self.process_group.restype = None
            self.process_group.argtypes = [c_int, c_int]


def _encode(text):
    return text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)


# ---- the process group's rank ----

# A process launched without RANK (torch.multiprocessing.spawn, a plain Popen) learns
# its rank from init_process_group: once torch.distributed is initialized, its rank and
# world size go to the library (teller_process_group), once per process. Looked at when
# a hooked step ends, at most once a second until then.
_GROUP_CHECK_NS = 1000000000
_group_pending = False  # install() sets it when the library takes the report
_group_next_check_ns = 0


def _check_process_group(now_ns):
    global _group_pending, _group_next_check_ns
    if now_ns < _group_next_check_ns:
        return
    _group_next_check_ns = now_ns + _GROUP_CHECK_NS
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return
        rank, world_size = int(dist.get_rank()), int(dist.get_world_size())
    except Exception:
        _group_pending = False  # a torch.distributed we do not understand: stop looking
        return
    _group_pending = False
    if _native.process_group is not None:
        _native.process_group(rank, world_size)


def _reset_process_group():
    # A forked child is a process of its own: it reports its own group, if it joins one.
    global _group_pending, _group_next_check_ns
    _group_pending = _native is not None and _native.process_group is not None
    _group_next_check_ns = 0


# ---- wrappers ----

def _plain_wrapper(fn, name, layer):
    host_range = _native.host_range
    name_bytes = _encode(name)

    def wrapper(*args, **kwargs):
        start = _now()
        try:
            return fn(*args, **kwargs)
        finally:
            host_range(layer, name_bytes, start, _now(), -1, None, None)

    return wrapper


def _comm_wrapper(fn, name, layer):
    """A collective call: pushed on entry and popped on return, so a rank blocked in it
    is seen waiting there (under `--watch` a hang writes the ranges still open); a
    rank that never entered it has no such range (cause/hang_report)."""
    push, pop = _native.range_push, _native.range_pop
    name_bytes = _encode(name)

    def wrapper(*args, **kwargs):
        push(name_bytes, layer)
        try:
            return fn(*args, **kwargs)
        finally:
            pop()

    return wrapper


def _batch_wrapper(fn, name, layer, adapter):
    """A non-STEP function whose result (e.g. a scheduler output) names the batch of
    the STEP range open on this thread."""
    host_range = _native.host_range
    name_bytes = _encode(name)

    def wrapper(*args, **kwargs):
        start = _now()
        result = None
        try:
            result = fn(*args, **kwargs)
            return result
        finally:
            end = _now()
            batch = adapter.safe_from_result(result, args, kwargs)
            if batch is not None:
                _hand_batch(batch)
            host_range(layer, name_bytes, start, end, -1, None, None)

    return wrapper


def _hand_batch(batch, keep_first=False):
    # To the STEP open on this thread (replacing an earlier batch unless keep_first), else
    # to the async STEP of this task (its first batch is kept).
    if not getattr(_tls, "in_step", False):
        cell = _async_step.get()
        if cell is not None:
            if cell[0] is None:
                cell[0] = batch
            return
    if not keep_first or getattr(_tls, "batch", None) is None:
        _tls.batch = batch


# An adapter's from_call returns it for a call of a STEP function that runs no batch of
# the service (vLLM's model runner V2 runs its warm-up and CUDA-graph capture batches
# through execute_model(dummy_run=True)): an FE range, no step index. Falsy, so a nested
# STEP's `from_call() or from_result()` goes on to from_result.
NOT_A_STEP = teller_adapters.NOT_A_STEP


def _fe_range(fn, name_bytes, args, kwargs):
    start = _now()
    try:
        return fn(*args, **kwargs)
    finally:
        _native.host_range(FE, name_bytes, start, _now(), -1, None, None)


async def _async_fe_range(fn, name_bytes, args, kwargs):
    start = _now()
    try:
        return await fn(*args, **kwargs)
    finally:
        _native.host_range(FE, name_bytes, start, _now(), -1, None, None)


def _step_wrapper(fn, name, adapter):
    host_range = _native.host_range
    step_begin = _native.step_begin
    name_bytes = _encode(name)
    counter = _step_counter

    def wrapper(*args, **kwargs):
        in_step = getattr(_tls, "in_step", False)
        if in_step or _async_step.get() is not None:
            # A STEP inside a STEP on one thread (uniprocess executors) or inside this
            # task's coroutine STEP: the inner one is an FE range and hands its batch to
            # the outer step.
            start = _now()
            result = None
            try:
                result = fn(*args, **kwargs)
                return result
            finally:
                end = _now()
                batch = adapter.safe_from_call(args, kwargs) or adapter.safe_from_result(
                    result, args, kwargs)
                if batch is not None:
                    _hand_batch(batch, keep_first=True)
                host_range(FE, name_bytes, start, end, -1, None, None)
        batch = adapter.safe_from_call(args, kwargs)
        if batch is NOT_A_STEP:
            return _fe_range(fn, name_bytes, args, kwargs)
        _tls.in_step = True
        _tls.batch = None
        step_begin()
        start = _now()
        result = None
        try:
            result = fn(*args, **kwargs)
            return result
        finally:
            end = _now()
            _tls.in_step = False
            if batch is None:
                batch = _tls.batch
            if batch is None:
                batch = adapter.safe_from_result(result, args, kwargs)
            _tls.batch = None
            ids, phase = batch if batch is not None else ((), None)
            host_range(STEP, name_bytes, start, end, next(counter),
                       _encode(phase) if phase else None,
                       _encode("\n".join(str(i) for i in ids)))
            if _group_pending:
                _check_process_group(end)

    return wrapper


# ---- coroutine functions: the range times the whole await, not the coroutine's creation ----

def _async_plain_wrapper(fn, name, layer, adapter=None):
    host_range = _native.host_range
    name_bytes = _encode(name)

    async def wrapper(*args, **kwargs):
        start = _now()
        result = None
        try:
            result = await fn(*args, **kwargs)
            return result
        finally:
            end = _now()
            if adapter is not None:
                batch = adapter.safe_from_result(result, args, kwargs)
                if batch is not None:
                    _hand_batch(batch)
            host_range(layer, name_bytes, start, end, -1, None, None)

    return wrapper


def _async_step_wrapper(fn, name, adapter):
    """A coroutine STEP (vLLM 0.6's _AsyncLLMEngine.step_async). Its batch cell lives in
    the task's context: steps of other tasks interleaved on the thread stay steps of
    their own, and a STEP called inside it (same task) becomes an FE range."""
    host_range = _native.host_range
    step_begin = _native.step_begin
    name_bytes = _encode(name)
    counter = _step_counter

    async def wrapper(*args, **kwargs):
        if _async_step.get() is not None or getattr(_tls, "in_step", False):
            start = _now()
            result = None
            try:
                result = await fn(*args, **kwargs)
                return result
            finally:
                end = _now()
                batch = adapter.safe_from_call(args, kwargs) or adapter.safe_from_result(
                    result, args, kwargs)
                if batch is not None:
                    _hand_batch(batch)
                host_range(FE, name_bytes, start, end, -1, None, None)
        cell = [adapter.safe_from_call(args, kwargs)]
        if cell[0] is NOT_A_STEP:
            return await _async_fe_range(fn, name_bytes, args, kwargs)
        token = _async_step.set(cell)
        step_begin()
        start = _now()
        result = None
        try:
            result = await fn(*args, **kwargs)
            return result
        finally:
            end = _now()
            try:
                _async_step.reset(token)
            except ValueError:  # resumed in another context: nothing of ours to undo
                pass
            batch = cell[0]
            if batch is None:
                batch = adapter.safe_from_result(result, args, kwargs)
            ids, phase = batch if batch is not None else ((), None)
            host_range(STEP, name_bytes, start, end, next(counter),
                       _encode(phase) if phase else None,
                       _encode("\n".join(str(i) for i in ids)))
            if _group_pending:
                _check_process_group(end)

    return wrapper


def _make_wrapper(fn, spec):
    name = spec.qualname
    adapter = teller_adapters.get(spec.adapter, spec.adapter_args) if spec.adapter else None
    if spec.adapter and adapter is None:
        _warn("unknown adapter %r for %s:%s; wrapping it plainly" %
              (spec.adapter, spec.module, spec.qualname))
    if inspect.iscoroutinefunction(fn):
        if adapter is not None and adapter.wraps_call:
            adapter = None  # a call-wrapping adapter (torch_module) has no async form
        if spec.layer == STEP:
            return _async_step_wrapper(fn, name, adapter or teller_adapters.NO_BATCH)
        return _async_plain_wrapper(fn, name, spec.layer, adapter)
    if adapter is not None and adapter.wraps_call:
        return adapter.wrap_call(fn, spec, _native.host_range, _now)
    if spec.layer == STEP:
        return _step_wrapper(fn, name, adapter or teller_adapters.NO_BATCH)
    if adapter is not None:
        return _batch_wrapper(fn, name, spec.layer, adapter)
    if spec.layer == COMM and _native.range_push is not None:
        return _comm_wrapper(fn, name, spec.layer)
    return _plain_wrapper(fn, name, spec.layer)


def _find(module, qualname):
    """(owner, attribute name, raw attribute) of qualname in module; raises
    LookupError saying which part is missing."""
    owner = module
    parts = qualname.split(".")
    for index, part in enumerate(parts):
        where = ".".join(parts[:index]) or "module"
        if isinstance(owner, type) or index == 0:
            raw = owner.__dict__.get(part) if hasattr(owner, "__dict__") else None
        else:
            raw = None
        if raw is None:
            try:
                raw = getattr(owner, part)
            except Exception:
                raise LookupError("%s has no attribute %r" % (where, part)) from None
        if index == len(parts) - 1:
            return owner, part, raw
        owner = raw


def _apply(module, specs, report=True):
    """Wraps what specs name in module; a target that is missing is reported (report)
    and never breaks the program."""
    for spec in specs:
        try:
            owner, attr, raw = _find(module, spec.qualname)
            if getattr(raw, "__teller_wrapped__", False) or getattr(
                    getattr(raw, "__func__", None), "__teller_wrapped__", False):
                continue
            if isinstance(raw, staticmethod):
                wrapped = staticmethod(_make_wrapper(raw.__func__, spec))
                inner = wrapped.__func__
            elif isinstance(raw, classmethod):
                wrapped = classmethod(_make_wrapper(raw.__func__, spec))
                inner = wrapped.__func__
            elif callable(raw):
                wrapped = inner = _make_wrapper(raw, spec)
            else:
                raise LookupError("%s is not callable" % spec.qualname)
            _copy_identity(raw if callable(raw) else raw.__func__, inner)
            inner.__teller_wrapped__ = True
            setattr(owner, attr, wrapped)
            _wrapped.append((spec.module, spec.qualname))
        except LookupError as error:
            if report:
                _report_miss(spec, str(error))
        except Exception as error:
            if report:
                _report_miss(spec, "%s: %s" % (type(error).__name__, error))


# ---- hooks that did not attach ----

def _report_miss(spec, why):
    """Once per hook and process: one stderr line (once per recording: children inherit
    the list) and a note in the bundle (meta.json notes; a mark with older libraries).
    A `?` target is absent from some releases by design: not reported."""
    key = "%s:%s" % (spec.module, spec.qualname)
    if key in _misses or spec.optional:
        return
    _misses[key] = why
    text = "hook %s did not attach: module imported, %s" % (key, why)
    told = os.environ.get("TELLER_HOOKS_MISSED", "")
    if key not in told.split(";"):
        sys.stderr.write("teller: %s\n" % text)
        os.environ["TELLER_HOOKS_MISSED"] = told + ";" + key if told else key
    try:
        if _native.note is not None:
            _native.note(_encode(text))
        else:
            _native.mark(_encode("teller: " + text))
    except Exception:
        pass


def _report_unattached():
    """At exit: every target whose module was imported and that is not wrapped (a
    module our finder never saw executing, a __main__ class never defined). Modules
    never imported stay silent: the engine does not use them."""
    done = set(_wrapped)
    for name, specs in list(_targets.items()):
        module = sys.modules.get(name)
        if module is None:
            continue
        for spec in specs:
            if spec.optional or (spec.module, spec.qualname) in done:
                continue
            key = "%s:%s" % (spec.module, spec.qualname)
            if key in _misses:
                continue
            try:
                _find(module, spec.qualname)
                why = "never wrapped"
            except LookupError as error:
                why = str(error)
            except Exception as error:
                why = "%s: %s" % (type(error).__name__, error)
            if name == "__main__":
                why += (" (a class of the launched script attaches when its module-level"
                        " class statement runs; else move it to a module)")
            _report_miss(spec, why)


def _at_exit():
    try:
        _report_unattached()
    except Exception:
        pass


def _copy_identity(original, wrapper):
    for key in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, key, getattr(original, key))
        except Exception:
            pass
    try:
        wrapper.__wrapped__ = original
        wrapper.__dict__.update(getattr(original, "__dict__", {}))
    except Exception:
        pass


# ---- import-time wrapping ----

class _Loader(importlib.abc.Loader):
    def __init__(self, loader, specs):
        self._loader = loader
        self._specs = specs

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _apply(module, self._specs)

    def __getattr__(self, name):  # get_source, is_package, get_code, ...
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Costs one dict lookup for modules it does not wrap."""

    def __init__(self, targets):
        self._targets = targets

    def find_spec(self, fullname, path, target=None):
        specs = self._targets.get(fullname)
        if specs is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, specs)
        return spec


# ---- classes of the launched script ----

# `__main__` is never imported, so the finder never sees it: a `__main__:Engine.step`
# target attaches when the script's `class Engine` statement has built the class
# (builtins.__build_class__, called once per class statement; installed only when a
# hooks file names __main__). Under multiprocessing's spawn the script runs again as
# __mp_main__. A class built inside a function (qualname with <locals>) is not matched.
_MAIN_NAMES = ("__main__", "__mp_main__")


def _hook_main_classes(specs):
    import builtins

    by_class = {}
    for spec in specs:
        by_class.setdefault(spec.qualname.split(".", 1)[0], []).append(spec)
    original = builtins.__build_class__

    def __build_class__(func, name, *bases, **kwargs):
        cls = original(func, name, *bases, **kwargs)
        pending = by_class.get(name)
        if pending is not None:
            try:
                if cls.__module__ in _MAIN_NAMES and cls.__qualname__ == name:
                    _apply(_Namespace({name: cls}), pending)
            except Exception:
                pass
        return cls

    builtins.__build_class__ = __build_class__


class _Namespace:
    """What _apply walks for a class of __main__ just built: {name: class}."""

    def __init__(self, names):
        self.__dict__.update(names)


def _hook_threads():
    original = threading.Thread._bootstrap_inner
    name_thread = _native.lib.teller_name_thread

    def _bootstrap_inner(self):
        try:
            name_thread(_encode(self.name))
        except Exception:
            pass
        return original(self)

    threading.Thread._bootstrap_inner = _bootstrap_inner


def _hook_exit():
    # os._exit skips atexit (multiprocessing children end with it): flush first.
    original = os._exit
    shutdown = _native.lib.teller_shutdown

    def _exit(code):
        _at_exit()
        try:
            shutdown(int(code))
        except Exception:
            pass
        original(code)

    os._exit = _exit


# An exception nobody caught, as a mark of this process (wire::kUncaughtExceptionMark):
# with several processes on one stderr, the trace still says which one raised it.
_UNCAUGHT_MARK = "teller: uncaught exception: "


def _mark_uncaught(exc_type, exc_value):
    try:
        text = "%s: %s" % (getattr(exc_type, "__name__", "exception"), exc_value)
        _native.mark(_encode(_UNCAUGHT_MARK + text.replace("\n", " ")[:300]))
    except Exception:
        pass


def _hook_uncaught():
    original = sys.excepthook

    def excepthook(exc_type, exc_value, traceback):
        if not issubclass(exc_type, (KeyboardInterrupt, SystemExit)):
            _mark_uncaught(exc_type, exc_value)
        return original(exc_type, exc_value, traceback)

    sys.excepthook = excepthook
    original_thread_hook = threading.excepthook

    def thread_excepthook(args):
        if args.exc_type is not SystemExit:
            _mark_uncaught(args.exc_type, args.exc_value)
        return original_thread_hook(args)

    threading.excepthook = thread_excepthook


def install(hooks=None):
    """Installs the hooks of TELLER_PYTHON_HOOKS ("default" or a file); returns the
    number of hook specs, 0 when nothing was installed."""
    global _native, _installed
    if _installed:
        return 0
    lib_path = os.environ.get("TELLER_CAPTURE_LIB", "")
    if not lib_path:
        return 0
    native = _Native(lib_path)
    if not native.lib.teller_capture_active():
        return 0
    _native = native
    if hooks is None:
        setting = os.environ.get("TELLER_PYTHON_HOOKS", "default")
        if setting in ("", "0"):
            return 0
        path = _default_hooks_path() if setting == "default" else setting
        hooks = parse_hooks(_read(path), path)
    targets = _targets
    for spec in hooks:
        targets.setdefault(spec.module, []).append(spec)
    sys.meta_path.insert(0, _Finder(targets))
    for name, specs in targets.items():
        if name in sys.modules:  # imported before us (__main__: its classes may come later)
            _apply(sys.modules[name], specs, report=name != "__main__")
    if "__main__" in targets:
        _hook_main_classes(targets["__main__"])
    _hook_threads()
    _hook_uncaught()
    _hook_exit()
    atexit.register(_at_exit)
    _reset_process_group()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_reset_process_group)
    _installed = True
    return len(hooks)


def wrapped():
    """(module, qualname) of every function wrapped so far."""
    return list(_wrapped)
