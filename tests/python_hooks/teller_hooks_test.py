"""Unit tests of python/teller_hook/teller_hooks.py with a fake capture library (no
libteller_capture.so needed): `python3 tests/python_hooks/teller_hooks_test.py`."""
import asyncio
import inspect
import io
import itertools
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
        teller_hooks._step_counter = itertools.count()
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
        # A plain STEP outside any coroutine step is still a step; the process numbers
        # its steps once, whichever function ran them.
        Runner().execute_model(Batch(["y"], "decode"))
        self.assertEqual(self.native.described(),
                         ["FE Runner.execute_model",
                          "STEP Engine.step_async step=0 phase=prefill requests=x",
                          "STEP Runner.execute_model step=1 phase=decode requests=y"])

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


FAKE_ENGINES = os.path.join(HERE, "..", "data", "fake_engines")


class DefaultTargetsTest(HookTestCase):
    """The default hooks (default_hooks.txt) on the fake engines of tests/data/fake_engines,
    which carry the real engines' qualified names and call shapes."""

    def engines(self, *names):
        # Fresh modules per test: wrappers keep the native library they were made with.
        for name in [n for n in sys.modules if n.split(".")[0] in ("vllm", "sglang")]:
            del sys.modules[name]
        sys.path.insert(0, FAKE_ENGINES)
        self.addCleanup(sys.path.remove, FAKE_ENGINES)
        import importlib
        modules = [importlib.import_module(name) for name in names]
        specs = teller_hooks.parse_hooks("@default")
        by_module = {}
        for spec in specs:
            by_module.setdefault(spec.module, []).append(spec)
        for name, module_specs in by_module.items():
            if name in sys.modules:
                teller_hooks._apply(sys.modules[name], module_specs)
        return modules

    def test_a_batch_queue_step_carries_the_batch_it_finished(self):
        core_module, sched = self.engines("vllm.v1.engine.core", "vllm.v1.core.sched.scheduler")
        core = core_module.EngineCore(sched.Scheduler([(["q1"], []), (["q2"], ["q1"])]))
        self.assertEqual([core.step_with_batch_queue() for _ in range(3)],
                         [None, {"tokens": 1}, {"tokens": 2}])
        steps = [d for d in self.native.described() if d.startswith("STEP")]
        self.assertEqual(steps, [
            # Only scheduled [q1]: its batch is the one it made.
            "STEP EngineCore.step_with_batch_queue step=0 phase=prefill requests=q1",
            # Scheduled [q2, q1] and waited for [q1]: update_from_output names [q1].
            "STEP EngineCore.step_with_batch_queue step=1 phase=prefill requests=q1",
            "STEP EngineCore.step_with_batch_queue step=2 phase=mixed requests=q2,q1"])
        # The in-process model runner nests: FE ranges, no steps of its own.
        self.assertEqual(self.native.described().count("FE GPUModelRunner.execute_model"), 2)
        self.assertEqual(self.stderr.getvalue(), "")

    def test_model_runner_v2_warm_up_runs_are_not_steps(self):
        (mrv2,) = self.engines("vllm.v1.worker.gpu.model_runner")
        from vllm.v1.core.sched.scheduler import SchedulerOutput
        runner = mrv2.GPUModelRunner()
        runner._dummy_run(4)
        runner.execute_model(SchedulerOutput(["n1"], ["n0"]))
        runner.execute_model(SchedulerOutput([], ["n1"]), None, False)
        self.assertEqual(self.native.described(), [
            "FE GPUModelRunner.execute_model",
            "STEP GPUModelRunner.execute_model step=0 phase=mixed requests=n1,n0",
            "STEP GPUModelRunner.execute_model step=1 phase=decode requests=n1"])
        self.assertEqual(self.native.step_begins, 2)

    def test_sglang_tp_server_steps_are_numbered_once_across_prefill_and_decode(self):
        (tp,) = self.engines("sglang.srt.managers.tp_worker")
        server = tp.ModelTpServer(is_mixed_chunk=True)
        server.forward_prefill_batch(tp.ScheduleBatch(["p1", "p2"]))
        server.forward_decode_batch(tp.ScheduleBatch(["p1", "p2"]))
        server.running_batch = tp.ScheduleBatch(["p2"])
        server.forward_prefill_batch(tp.ScheduleBatch(["p3"]))
        self.assertEqual(self.native.described(), [
            "STEP ModelTpServer.forward_prefill_batch step=0 phase=prefill requests=p1,p2",
            # Read when the call starts: p1 finished inside it and is still named.
            "STEP ModelTpServer.forward_decode_batch step=1 phase=decode requests=p1,p2",
            "STEP ModelTpServer.forward_prefill_batch step=2 phase=mixed requests=p3,p2"])

    def test_version_bound_targets_are_not_reported_where_a_release_lacks_them(self):
        # SGLang 0.3.3+ keeps tp_worker without ModelTpServer; vLLM 0.11+ keeps
        # async_llm_engine without _AsyncLLMEngine: both lines are `?`.
        later = types.ModuleType("sglang.srt.managers.tp_worker")
        later.TpModelWorker = type("TpModelWorker", (), {})
        specs = [s for s in teller_hooks.parse_hooks("@default") if s.module == later.__name__]
        self.assertTrue(specs and all(s.optional for s in specs))
        sys.modules[later.__name__] = later
        self.addCleanup(sys.modules.pop, later.__name__)
        teller_hooks._targets[later.__name__] = specs
        teller_hooks._apply(later, specs)
        teller_hooks._at_exit()
        self.assertEqual(self.stderr.getvalue(), "")
        self.assertEqual(self.native.notes, [])
        # The same target on a line without `?` is reported.
        plain = teller_hooks.parse_hooks(
            "sglang.srt.managers.tp_worker:ModelTpServer.forward_decode_batch:STEP")
        self.assertFalse(plain[0].optional)
        teller_hooks._apply(later, plain)
        self.assertIn("ModelTpServer.forward_decode_batch did not attach", self.stderr.getvalue())

    def test_a_coroutine_engine_step_of_vllm_0_6(self):
        (engine_module, v0) = self.engines("vllm.engine.async_llm_engine", "vllm.core.scheduler")
        engine = engine_module._AsyncLLMEngine(v0.Scheduler([(["x0", "x1"], 1)]))
        self.assertTrue(inspect.iscoroutinefunction(engine_module._AsyncLLMEngine.step_async))
        asyncio.run(engine.step_async(0))
        self.assertEqual(self.native.described(), [
            "FE Scheduler.schedule", "STEP _AsyncLLMEngine.step_async step=0 phase=mixed "
            "requests=x0,x1"])


if __name__ == "__main__":
    unittest.main()
