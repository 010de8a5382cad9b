"""Fake vllm.engine.async_llm_engine (0.6): step_async is a coroutine per virtual engine."""
import asyncio

from vllm.engine.llm_engine import LLMEngine, RequestOutput


class _AsyncLLMEngine(LLMEngine):
    async def step_async(self, virtual_engine):
        _, outputs, _ = self.scheduler[virtual_engine].schedule()
        await asyncio.sleep(0)
        return [RequestOutput(g.seq_group.request_id) for g in outputs.scheduled_seq_groups]
