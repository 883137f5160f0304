"""A ConvNeXt-style classifier (torchvision's layout): a 4x4 patchify stem, blocks of a 7x7
depthwise convolution, a channels-last LayerNorm (permute, LayerNorm, permute), an inverted MLP of
Linear layers with GELU, a learned per-channel layer scale and a residual; LayerNorm2d and 2x2
strided convolutions between stages.

An ordinary PyTorch model file: only the import lines differ from a torch version.
"""
import flow as torch
import flow.nn as nn
import flow.nn.functional as F


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Permute(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return torch.permute(x, self.dims)


class CNBlock(nn.Module):
    def __init__(self, dim, layer_scale=1e-6):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]),
            nn.LayerNorm(dim, eps=1e-6),
            nn.Linear(dim, 4 * dim),
            nn.GELU(),
            nn.Linear(4 * dim, dim),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)

    def forward(self, x):
        return self.layer_scale * self.block(x) + x


class ConvNeXt(nn.Module):
    def __init__(self, depths=(3, 3, 9, 3), dims=(96, 192, 384, 768), num_classes=1000):
        super().__init__()
        layers = [nn.Sequential(nn.Conv2d(3, dims[0], kernel_size=4, stride=4), LayerNorm2d(dims[0], eps=1e-6))]
        for i, (depth, dim) in enumerate(zip(depths, dims)):
            layers.append(nn.Sequential(*[CNBlock(dim) for _ in range(depth)]))
            if i + 1 < len(dims):
                layers.append(nn.Sequential(LayerNorm2d(dim, eps=1e-6), nn.Conv2d(dim, dims[i + 1], 2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(LayerNorm2d(dims[-1], eps=1e-6), nn.Flatten(1), nn.Linear(dims[-1], num_classes))

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


def convnext_tiny(num_classes=1000):
    return ConvNeXt(num_classes=num_classes)


def convnext_small_test(num_classes=10):
    """One or two blocks per stage at a quarter of the width: the same ops, a fraction of the work."""
    return ConvNeXt(depths=(1, 1, 2, 1), dims=(24, 48, 96, 192), num_classes=num_classes)
