"""A small PyTorch transformer serving batches in prefill and decode steps, for
tests/gpu/run.sh. ToyGpuEngine.step is wrapped as the STEP by gpu_hooks.txt (adapter
generic_batch: the batch's request_ids and phase)."""
import torch
import torch.nn as nn


class Batch:
    def __init__(self, request_ids, phase, tokens):
        self.request_ids = request_ids
        self.phase = phase
        self.tokens = tokens


class TinyLM(nn.Module):
    def __init__(self, vocab=4096, dim=512, layers=4, heads=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.blocks(self.embed(tokens)))


class ToyGpuEngine:
    def __init__(self, device="cuda"):
        self.device = device
        self.model = TinyLM().to(device).eval()

    @torch.no_grad()
    def step(self, batch):
        with torch.cuda.nvtx.range("model_forward"):
            logits = self.model(batch.tokens)
        next_tokens = logits[:, -1:].argmax(-1)
        return torch.cat([batch.tokens, next_tokens], dim=1)
