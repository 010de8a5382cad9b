from torch.nn.modules.module import Module  # noqa: F401
