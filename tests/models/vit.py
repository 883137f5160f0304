"""A ViT-B/16-style encoder: patch convolution, class token (cat), learned positional embedding,
12 x nn.TransformerEncoderLayer(d=768, 12 heads, gelu, norm_first, batch_first), final LayerNorm
and a linear head on the class token.

An ordinary PyTorch model file: only the import lines differ from a torch version (tests build
the torch twin by replacing them), so it must stay plain torch code.
"""
import flow as torch
import flow.nn as nn


class VisionTransformer(nn.Module):
    def __init__(self, image_size=224, patch_size=16, num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072,
                 num_classes=1000, dropout=0.0):
        super().__init__()
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, seq_length, hidden_dim) * 0.02)
        self.layers = nn.Sequential(*[
            nn.TransformerEncoderLayer(hidden_dim, num_heads, dim_feedforward=mlp_dim, dropout=dropout,
                                       activation="gelu", layer_norm_eps=1e-6, batch_first=True, norm_first=True)
            for _ in range(num_layers)
        ])
        self.ln = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.head = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x)                      # [n, hidden, h/p, w/p]
        x = x.flatten(2).transpose(1, 2)           # [n, seq - 1, hidden]
        cls = self.class_token.expand(n, -1, -1)
        x = torch.cat([cls, x], dim=1)             # [n, seq, hidden]
        x = x + self.pos_embedding
        x = self.layers(x)
        x = self.ln(x)
        return self.head(x[:, 0])


def vit_b_16(image_size=224, num_layers=12, num_classes=1000):
    return VisionTransformer(image_size=image_size, num_layers=num_layers, num_classes=num_classes)
