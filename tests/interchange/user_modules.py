"""Small torch modules for the user-module tests (importable by anpred's worker processes)."""

from __future__ import annotations

import torch
from torch import nn


class SmallCnn(nn.Module):
    """Conv stem (a Sequential), a body (a Sequential of three layers), pool and head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.body = nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1), nn.GELU(), nn.Conv2d(8, 16, 3, stride=2, padding=1)
        )
        self.drop = nn.Dropout(0.1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.drop(self.body(self.stem(x)))).flatten(1))


class Tokens(nn.Module):
    """Token ids (int64) and a float scale, taken by name: an embedding, a transformer block."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.block = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
        self.head = nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.emb(ids) * scale).mean(1))


class Eigen(nn.Module):
    """``torch.linalg.eigh``, which the ONNX exporter does not support."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.eigh(x @ x.transpose(-1, -2))[0]


def build_cnn() -> tuple[nn.Module, torch.Tensor]:
    """A ``file.py:function`` builder: the module and its example input."""
    return SmallCnn(), torch.randn(1, 3, 32, 32)


def build_tokens() -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """Two named inputs, one of them integer."""
    return Tokens(), {"ids": torch.randint(0, 50, (1, 8)), "scale": torch.rand(1, 8, 1)}


def build_eigen() -> tuple[nn.Module, torch.Tensor]:
    """A module that cannot be exported."""
    return Eigen(), torch.randn(1, 4, 4)


def build_bare() -> nn.Module:
    """The module alone (its input shape comes from --input-shape)."""
    return SmallCnn()


class Masked(nn.Module):
    """A mask built in ``forward`` by slice assignment (as swin_t's shifted windows are):
    ``ScatterND`` on constants in the export, which folding removes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = x.new_zeros((x.shape[-2], x.shape[-1]))
        mask[: x.shape[-2] // 2, :] = 1.0
        return self.conv(x) * mask


def build_masked() -> tuple[nn.Module, torch.Tensor]:
    """A module whose export holds constant arithmetic."""
    return Masked(), torch.randn(1, 3, 8, 8)


class Block(nn.Module):
    """A pre-norm transformer block (one head) on ``[batch, tokens, 16]``."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        attention = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        x = x + self.proj(attention @ v)
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))
