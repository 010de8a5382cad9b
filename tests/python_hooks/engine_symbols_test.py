"""The default hooks against the engines' releases, through the symbol tables of
tests/fixtures/engine_symbols (scripts/engine_symbols.py extracts them from the engines'
sources; no mirror is needed here): `python3 tests/python_hooks/engine_symbols_test.py`."""
import copy
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import engine_symbols  # noqa: E402


def by_version(tables, engine, version):
    return next(t for t in tables if t.engine == engine and t.version == version)


class ReleasesTest(unittest.TestCase):
    def setUp(self):
        self.tables = engine_symbols.load_tables()
        self.hooks = engine_symbols.default_hooks()

    def test_every_claim_holds_in_every_release(self):
        self.assertEqual(engine_symbols.check(self.tables, self.hooks), [])

    def test_the_fixtures_span_the_releases_the_docs_claim(self):
        versions = {e: [t.version for t in self.tables if t.engine == e]
                    for e in ("vllm", "sglang")}
        self.assertGreaterEqual(len(versions["vllm"]), 6)
        self.assertGreaterEqual(len(versions["sglang"]), 4)
        self.assertEqual(versions["vllm"][0], "0.6.0")
        self.assertEqual(versions["sglang"][0], "0.3.0")
        # Every release of RELEASES has its table, and nothing else is there.
        self.assertEqual(sorted((e, v) for e, v, *_ in engine_symbols.RELEASES),
                         sorted((t.engine, t.version) for t in self.tables))

    def test_the_newest_releases_reach_their_serve_path(self):
        newest = {t.engine: t for t in self.tables}  # sorted: the last one wins
        expected = {
            "vllm": ["vllm.v1.engine.core:EngineCore.step",
                     "vllm.v1.engine.core:EngineCore.step_with_batch_queue",
                     "vllm.v1.worker.gpu_model_runner:GPUModelRunner.execute_model",
                     "vllm.v1.worker.gpu.model_runner:GPUModelRunner.execute_model"],
            "sglang": ["sglang.srt.managers.scheduler:Scheduler.run_batch"],
        }
        for engine, targets in expected.items():
            serve = [h.target for h in self.hooks
                     if h.engine == engine and h.layer == "STEP" and h.open_claim]
            self.assertEqual(sorted(serve), sorted(targets), engine)
            for hook in self.hooks:
                if hook.target in targets:
                    self.assertEqual(engine_symbols.hook_state(newest[engine], hook),
                                     ("ok", None), hook.target)

    def test_each_release_has_a_step_hook_that_resolves(self):
        for table in self.tables:
            steps = [h.target for h in self.hooks if h.engine == table.engine and
                     h.layer == "STEP" and engine_symbols.hook_state(table, h)[0] == "ok"]
            self.assertTrue(steps, "%s %s" % (table.engine, table.version))

    def test_the_v1_llm_engine_of_later_releases_is_told_apart(self):
        # From 0.11 vllm.engine.llm_engine:LLMEngine is the V1 LLMEngine: its step resolves
        # outside its claim, and the adapter makes it an FE range by its engine_core.
        hook = next(h for h in self.hooks if h.target == "vllm.engine.llm_engine:LLMEngine.step")
        for table in [t for t in self.tables if t.engine == "vllm"]:
            where = table.lookup("vllm.engine.llm_engine", "LLMEngine")
            fields = {f for _, _, info in table.mro(*where) for f in info["fields"]}
            self.assertEqual("engine_core" in fields,
                             not engine_symbols.in_claim(table.version, hook.claim),
                             table.version)

    def test_the_table_in_the_docs_is_the_generated_one(self):
        self.assertEqual(engine_symbols.doc_block(),
                         engine_symbols.markdown(self.tables, self.hooks),
                         "run scripts/engine_symbols.py --write-docs")


class MutationTest(unittest.TestCase):
    """The checks fail when a release moves what a hook or an adapter needs."""

    def setUp(self):
        self.tables = engine_symbols.load_tables()
        self.hooks = engine_symbols.default_hooks()

    def mutated(self, engine, version, change):
        tables = copy.deepcopy(self.tables)
        table = by_version(tables, engine, version)
        change(table.modules)
        return engine_symbols.check(tables, self.hooks)

    def test_a_field_the_adapter_reads_gone_from_a_claimed_release(self):
        def drop(modules):
            for entry in modules.values():
                info = entry["classes"].get("SchedulerOutput")
                if info:
                    info["fields"].remove("num_scheduled_tokens")
        problems = self.mutated("vllm", "0.8.5", drop)
        self.assertTrue(problems)
        self.assertTrue(all("vllm 0.8.5" in p and "no SchedulerOutput with "
                            "num_scheduled_tokens" in p for p in problems), problems)

    def test_a_renamed_parameter_the_adapter_reads(self):
        def rename(modules):
            method = modules["vllm.v1.worker.gpu.model_runner"]["classes"]["GPUModelRunner"][
                "methods"]["execute_model"]
            method["args"][1] = "sched_out"
        problems = self.mutated("vllm", "0.23.0", rename)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("parameter 1 of GPUModelRunner.execute_model is 'sched_out'", problems[0])

    def test_a_serve_path_step_gone_from_the_newest_release(self):
        newest = [t for t in self.tables if t.engine == "vllm"][-1].version

        def drop(modules):
            del modules["vllm.v1.engine.core"]["classes"]["EngineCore"]["methods"][
                "step_with_batch_queue"]
        problems = self.mutated("vllm", newest, drop)
        self.assertTrue(any("serve-path STEP hook vllm.v1.engine.core:EngineCore."
                            "step_with_batch_queue does not resolve" in p for p in problems),
                        problems)

    def test_an_old_release_losing_its_step(self):
        def drop(modules):
            del modules["sglang.srt.managers.tp_worker"]["classes"]["ModelTpServer"]
        problems = self.mutated("sglang", "0.3.0", drop)
        self.assertEqual(len(problems), 2, problems)  # prefill and decode batches
        self.assertTrue(all("module has no class 'ModelTpServer'" in p for p in problems))

    def test_a_hook_without_claim_or_reported_in_the_newest_release(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("vllm.v1.engine.core:EngineCore.step:STEP:vllm_v1_step\n"
                    "vllm.v1.engine.core:EngineCore.gone:FE  # vllm 0.6.6-0.7\n")
        self.addCleanup(os.remove, f.name)
        hooks = engine_symbols.default_hooks(f.name)
        problems = engine_symbols.check(self.tables, hooks)
        self.assertIn("EngineCore.step has no claim", problems[0])
        self.assertTrue(any("EngineCore.gone would be reported as not attached" in p
                            for p in problems), problems)
        self.assertTrue(any("vllm 0.6.6: vllm.v1.engine.core:EngineCore.gone (claimed "
                            "0.6.6-0.7) does not resolve" in p for p in problems), problems)


class ClaimTest(unittest.TestCase):
    def test_claims_cover_what_they_say(self):
        in_claim = engine_symbols.in_claim
        self.assertTrue(in_claim("0.10.1.1", "0.6.0-0.10"))
        self.assertFalse(in_claim("0.11.2.dev", "0.6.0-0.10"))
        self.assertTrue(in_claim("0.8.1", "0.6.6-0.8.1"))
        self.assertFalse(in_claim("0.8.2", "0.6.6-0.8.1"))
        self.assertTrue(in_claim("main-2026-08-17", "0.8.2+"))
        self.assertFalse(in_claim("0.11.1", "0.11.2.dev+"))
        self.assertTrue(in_claim("0.11.2", "0.11.2.dev+"))


if __name__ == "__main__":
    unittest.main()
