"""Fake sglang.srt.managers.tp_worker before SGLang 0.3.3: ModelTpServer runs a prefill
batch (taking in the running decode batch with mixed chunking) or a decode batch, whose
finished requests leave it before the call returns."""


class Req:
    def __init__(self, rid):
        self.rid = rid


class ScheduleBatch:  # 0.3.0's has no forward_mode
    def __init__(self, rids):
        self.reqs = [Req(r) for r in rids]


class ModelTpServer:
    def __init__(self, is_mixed_chunk=False):
        self.is_mixed_chunk = is_mixed_chunk
        self.running_batch = None

    def forward_prefill_batch(self, batch):
        if self.is_mixed_chunk and self.running_batch is not None:
            batch.reqs.extend(self.running_batch.reqs)
            self.running_batch = None
        return len(batch.reqs)

    def forward_decode_batch(self, batch):
        count = len(batch.reqs)
        batch.reqs = batch.reqs[1:]  # the first request finished
        return count
