"""Fake vllm.engine.llm_engine (v0)."""


class RequestOutput:
    def __init__(self, request_id):
        self.request_id = request_id


class LLMEngine:
    def __init__(self, scheduler):
        self.scheduler = [scheduler]

    def step(self):
        _, outputs, _ = self.scheduler[0].schedule()
        if not outputs.scheduled_seq_groups:
            raise RuntimeError("nothing to run")
        return [RequestOutput(g.seq_group.request_id) for g in outputs.scheduled_seq_groups]
