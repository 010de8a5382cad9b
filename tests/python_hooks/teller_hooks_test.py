"""Unit tests of python/teller_hook/teller_hooks.py with a fake capture library (no
libteller_capture.so needed): `python3 tests/python_hooks/teller_hooks_test.py`."""
import asyncio
import inspect
import io
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "teller_hook"))

import teller_hooks  # noqa: E402


class FakeNative:
    """Records what the hooks hand to the C API (capture_api.h)."""

    def __init__(self):
        self.ranges = []  # (layer, name, start, end, step, phase, requests)
        self.marks = []
        self.notes = []
        self.step_begins = 0
        self.process_group = None
        self.host_range = lambda *a: self.ranges.append(a)
        self.mark = lambda name: self.marks.append(name.decode())
        self.note = lambda text: self.notes.append(text.decode())

        def step_begin():
            self.step_begins += 1
        self.step_begin = step_begin

    def described(self):
        names = {v: k for k, v in teller_hooks.LAYERS.items()}
        out = []
        for layer, name, start, end, step, phase, requests in self.ranges:
            text = "%s %s" % (names[layer], name.decode())
            if step >= 0:
                text += " step=%d phase=%s requests=%s" % (
                    step, phase.decode() if phase else "-",
                    requests.decode().replace("\n", ",") if requests else "")
            out.append(text)
        return out


class Batch:
    def __init__(self, ids, phase):
        self.request_ids = ids
        self.phase = phase


def spec(module, qualname, layer, adapter=None):
    return teller_hooks.HookSpec(module, qualname, teller_hooks.LAYERS[layer], adapter)


class HookTestCase(unittest.TestCase):
    def setUp(self):
        self.native = FakeNative()
        teller_hooks._native = self.native
        teller_hooks._tls.__dict__.clear()
        teller_hooks._misses.clear()
        teller_hooks._targets.clear()
        os.environ.pop("TELLER_HOOKS_MISSED", None)
        self.stderr = io.StringIO()
        self._saved_stderr, sys.stderr = sys.stderr, self.stderr

    def tearDown(self):
        sys.stderr = self._saved_stderr


class AsyncWrapperTest(HookTestCase):
    def make_engine(self, sleep_s=0.02):
        class Scheduler:
            def schedule(self, ids):
                return Batch(ids, "decode")

        class AsyncEngine:
            def __init__(self):
                self.scheduler = Scheduler()

            async def step_async(self, ids):
                self.scheduler.schedule(ids)
                await asyncio.sleep(sleep_s)
                return list(ids)

            async def execute_async(self):
                await asyncio.sleep(sleep_s)
                return 7

        module = types.ModuleType("toy_async_engine")
        module.AsyncEngine, module.Scheduler = AsyncEngine, Scheduler
        return module

    def test_a_coroutine_step_is_timed_over_the_whole_await(self):
        module = self.make_engine()
        teller_hooks._apply(module, [spec("toy_async_engine", "AsyncEngine.step_async", "STEP"),
                                     spec("toy_async_engine", "AsyncEngine.execute_async", "FE")])
        self.assertTrue(inspect.iscoroutinefunction(module.AsyncEngine.step_async))
        self.assertEqual(module.AsyncEngine.step_async.__name__, "step_async")
        engine = module.AsyncEngine()
        self.assertEqual(asyncio.run(engine.step_async(["a"])), ["a"])
        self.assertEqual(asyncio.run(engine.execute_async()), 7)
        self.assertEqual(self.native.described(),
                         ["STEP AsyncEngine.step_async step=0 phase=- requests=",
                          "FE AsyncEngine.execute_async"])
        for layer, name, start, end, *_ in self.native.ranges:
            self.assertGreaterEqual(end - start, 15_000_000, name)  # the 20 ms sleep
        self.assertEqual(self.native.step_begins, 1)

    def test_interleaved_coroutine_steps_keep_their_own_batches(self):
        # Two virtual engines (pipeline parallel) step concurrently on one event loop.
        module = self.make_engine()
        import teller_adapters

        class FromResult(teller_adapters.Adapter):  # schedule() returns the batch
            def from_result(self, result, args, kwargs):
                return result.request_ids, result.phase
        teller_hooks._apply(module, [spec("toy_async_engine", "AsyncEngine.step_async", "STEP")])
        module.Scheduler.schedule = teller_hooks._batch_wrapper(
            module.Scheduler.schedule, "Scheduler.schedule", teller_hooks.FE, FromResult())

        async def main():
            engines = [module.AsyncEngine(), module.AsyncEngine()]
            await asyncio.gather(engines[0].step_async(["a", "b"]),
                                 engines[1].step_async(["c"]))
        asyncio.run(main())
        steps = sorted(d for d in self.native.described() if d.startswith("STEP"))
        self.assertEqual(steps, ["STEP AsyncEngine.step_async step=0 phase=decode requests=a,b",
                                 "STEP AsyncEngine.step_async step=1 phase=decode requests=c"])
        self.assertEqual(sum(d.startswith("FE") for d in self.native.described()), 2)

    def test_a_step_inside_a_coroutine_step_is_an_fe_range_giving_its_batch(self):
        class Runner:
            def execute_model(self, batch):
                return batch

        class Engine:
            def __init__(self):
                self.runner = Runner()

            async def step_async(self):
                self.runner.execute_model(Batch(["x"], "prefill"))
                await asyncio.sleep(0)

        module = types.ModuleType("toy")
        module.Engine, module.Runner = Engine, Runner
        teller_hooks._apply(module, [spec("toy", "Engine.step_async", "STEP"),
                                     spec("toy", "Runner.execute_model", "STEP", "generic_batch")])
        asyncio.run(Engine().step_async())
        # A plain STEP outside any coroutine step is still a step.
        Runner().execute_model(Batch(["y"], "decode"))
        self.assertEqual(self.native.described(),
                         ["FE Runner.execute_model",
                          "STEP Engine.step_async step=0 phase=prefill requests=x",
                          "STEP Runner.execute_model step=0 phase=decode requests=y"])

    def test_a_raising_coroutine_still_closes_its_range(self):
        class Engine:
            async def step_async(self):
                await asyncio.sleep(0)
                raise RuntimeError("boom")

        module = types.ModuleType("toy")
        module.Engine = Engine
        teller_hooks._apply(module, [spec("toy", "Engine.step_async", "STEP")])
        with self.assertRaises(RuntimeError):
            asyncio.run(Engine().step_async())
        self.assertEqual(self.native.described(), ["STEP Engine.step_async step=0 phase=- requests="])
        self.assertIsNone(teller_hooks._async_step.get())


class UnattachedHookTest(HookTestCase):
    def engine_module(self, name):
        class EngineCore:
            def step(self):
                return 1

        module = types.ModuleType(name)
        module.EngineCore = EngineCore
        return module

    def test_a_missing_method_of_an_imported_module_is_reported_once(self):
        module = self.engine_module("toy_engine_core")
        specs = [spec("toy_engine_core", "EngineCore.step_with_batch_queue", "STEP"),
                 spec("toy_engine_core", "NoSuchClass.step", "STEP"),
                 spec("toy_engine_core", "EngineCore.step", "STEP")]
        teller_hooks._apply(module, specs)
        teller_hooks._apply(module, specs)  # imported again (reload): no second report
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(lines, [
            "teller: hook toy_engine_core:EngineCore.step_with_batch_queue did not attach: "
            "module imported, EngineCore has no attribute 'step_with_batch_queue'",
            "teller: hook toy_engine_core:NoSuchClass.step did not attach: "
            "module imported, module has no attribute 'NoSuchClass'"])
        self.assertEqual(self.native.notes, [line[len("teller: "):] for line in lines])
        self.assertEqual(module.EngineCore().step(), 1)  # the one that exists is wrapped
        self.assertEqual(self.native.described(), ["STEP EngineCore.step step=0 phase=- requests="])

    def test_at_exit_imported_modules_say_what_never_attached_and_others_stay_silent(self):
        module = self.engine_module("toy_engine_core_exit")
        sys.modules["toy_engine_core_exit"] = module
        self.addCleanup(sys.modules.pop, "toy_engine_core_exit")
        teller_hooks._targets.update({
            "toy_engine_core_exit": [spec("toy_engine_core_exit", "EngineCore.step", "STEP"),
                                     spec("toy_engine_core_exit", "EngineCore.gone", "FE")],
            "toy_never_imported": [spec("toy_never_imported", "Engine.step", "STEP")]})
        self.native.note = None  # an older library: a mark in the trace instead
        teller_hooks._at_exit()
        teller_hooks._at_exit()
        self.assertEqual(self.stderr.getvalue().splitlines(), [
            "teller: hook toy_engine_core_exit:EngineCore.step did not attach: "
            "module imported, never wrapped",
            "teller: hook toy_engine_core_exit:EngineCore.gone did not attach: "
            "module imported, EngineCore has no attribute 'gone'"])
        self.assertEqual(len(self.native.marks), 2)
        self.assertTrue(self.native.marks[0].startswith("teller: hook toy_engine_core_exit:"))

    def test_child_processes_inherit_what_was_said_on_stderr(self):
        os.environ["TELLER_HOOKS_MISSED"] = "toy_engine_core:EngineCore.gone"
        module = self.engine_module("toy_engine_core")
        teller_hooks._apply(module, [spec("toy_engine_core", "EngineCore.gone", "STEP")])
        self.assertEqual(self.stderr.getvalue(), "")
        self.assertEqual(len(self.native.notes), 1)  # the process's own bundle folder


SCRIPT = """
class Batch:
    def __init__(self, ids):
        self.request_ids, self.phase = ids, "decode"

class MyEngine:
    def step(self, batch):
        return len(batch.request_ids)

    @staticmethod
    def helper():
        return 3

def run():
    return MyEngine().step(Batch(["m1", "m2"])), MyEngine.helper()
"""


class MainClassTest(HookTestCase):
    def setUp(self):
        super().setUp()
        import builtins
        self.addCleanup(setattr, builtins, "__build_class__", builtins.__build_class__)

    def run_script(self, name):
        namespace = {"__name__": name}
        exec(compile(SCRIPT, "<script>", "exec"), namespace)
        return namespace

    def test_a_class_of_the_launched_script_attaches_when_it_is_built(self):
        teller_hooks._hook_main_classes([
            spec("__main__", "MyEngine.step", "STEP", "generic_batch"),
            spec("__main__", "MyEngine.helper", "FE"),
            spec("__main__", "Batch.no_such", "FE")])
        self.assertEqual(self.run_script("__main__")["run"](), (2, 3))
        self.assertEqual(self.native.described(), [
            "STEP MyEngine.step step=0 phase=decode requests=m1,m2", "FE MyEngine.helper"])
        self.assertEqual(self.stderr.getvalue(),
                         "teller: hook __main__:Batch.no_such did not attach: module imported, "
                         "Batch has no attribute 'no_such'\n")

    def test_spawned_children_run_the_script_as_mp_main_and_other_modules_are_left(self):
        teller_hooks._hook_main_classes([spec("__main__", "MyEngine.step", "STEP")])
        self.run_script("__mp_main__")["run"]()
        self.run_script("some_module")["run"]()  # a class of the same name elsewhere
        self.assertEqual(self.native.described(), ["STEP MyEngine.step step=0 phase=- requests="])

    def test_a_class_never_defined_is_said_at_exit_with_what_to_do(self):
        main = types.ModuleType("__main__")
        saved = sys.modules["__main__"]
        sys.modules["__main__"] = main
        self.addCleanup(sys.modules.__setitem__, "__main__", saved)
        teller_hooks._targets["__main__"] = [spec("__main__", "Engine.step", "STEP")]
        teller_hooks._at_exit()
        self.assertIn("teller: hook __main__:Engine.step did not attach: module imported, "
                      "module has no attribute 'Engine' (a class of the launched script",
                      self.stderr.getvalue())


if __name__ == "__main__":
    unittest.main()
