"""A ShuffleNetV2-style classifier (torchvision's units, fewer of them): channel split (chunk),
depthwise convolutions, concatenation and the channel shuffle (view into groups, transpose,
contiguous, view back) between units.

An ordinary PyTorch model file: only the import lines differ from a torch version.
"""
import flow as torch
import flow.nn as nn


def channel_shuffle(x, groups):
    n, c, h, w = x.shape
    x = x.view(n, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(n, -1, h, w)


def conv_bn(cin, cout, kernel, stride=1, groups=1, relu=True):
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return layers


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(*conv_bn(cin, cin, 3, stride, groups=cin, relu=False), *conv_bn(cin, half, 1))
        self.branch2 = nn.Sequential(*conv_bn(cin if stride > 1 else half, half, 1),
                                     *conv_bn(half, half, 3, stride, groups=half, relu=False), *conv_bn(half, half, 1))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats=(2, 3, 2), channels=(24, 48, 96, 192, 512), num_classes=1000):
        super().__init__()
        self.conv1 = nn.Sequential(*conv_bn(3, channels[0], 3, 2))
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        stages, cin = [], channels[0]
        for n, cout in zip(repeats, channels[1:4]):
            stages.append(nn.Sequential(InvertedResidual(cin, cout, 2), *[InvertedResidual(cout, cout, 1)
                                                                          for _ in range(n - 1)]))
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.conv5 = nn.Sequential(*conv_bn(cin, channels[4], 1))
        self.fc = nn.Linear(channels[4], num_classes)

    def forward(self, x):
        x = self.conv5(self.stages(self.maxpool(self.conv1(x))))
        return self.fc(x.mean([2, 3]))


def shufflenet_v2(num_classes=1000):
    return ShuffleNetV2(num_classes=num_classes)
