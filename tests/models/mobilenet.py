"""A MobileNetV3-Large-style classifier (torchvision's layout): inverted residual blocks with
depthwise convolutions, squeeze-and-excitation (adaptive average pool, 1x1 convolutions, hardsigmoid,
a per-channel scale), ReLU and Hardswish, and a classifier with Dropout.

An ordinary PyTorch model file: only the import lines differ from a torch version.
"""
import flow as torch  # noqa: F401
import flow.nn as nn
import flow.nn.functional as F


def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        s = self.fc2(F.relu(self.fc1(s)))
        return x * F.hardsigmoid(s)


def conv_bn_act(cin, cout, kernel, stride=1, groups=1, activation=None):
    layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
    if activation is not None:
        layers.append(activation(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin, kernel, expanded, cout, use_se, activation, stride):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        act = nn.Hardswish if activation == "HS" else nn.ReLU
        layers = []
        if expanded != cin:
            layers.append(conv_bn_act(cin, expanded, 1, activation=act))
        layers.append(conv_bn_act(expanded, expanded, kernel, stride, groups=expanded, activation=act))
        if use_se:
            layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4)))
        layers.append(conv_bn_act(expanded, cout, 1))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return y + x if self.use_res_connect else y


LARGE = [  # input, kernel, expanded, output, squeeze-excite, activation, stride
    (16, 3, 16, 16, False, "RE", 1), (16, 3, 64, 24, False, "RE", 2), (24, 3, 72, 24, False, "RE", 1),
    (24, 5, 72, 40, True, "RE", 2), (40, 5, 120, 40, True, "RE", 1), (40, 5, 120, 40, True, "RE", 1),
    (40, 3, 240, 80, False, "HS", 2), (80, 3, 200, 80, False, "HS", 1), (80, 3, 184, 80, False, "HS", 1),
    (80, 3, 184, 80, False, "HS", 1), (80, 3, 480, 112, True, "HS", 1), (112, 3, 672, 112, True, "HS", 1),
    (112, 5, 672, 160, True, "HS", 2), (160, 5, 960, 160, True, "HS", 1), (160, 5, 960, 160, True, "HS", 1),
]


class MobileNetV3(nn.Module):
    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        layers = [conv_bn_act(3, 16, 3, stride=2, activation=nn.Hardswish)]
        layers += [InvertedResidual(*cfg) for cfg in LARGE]
        layers.append(conv_bn_act(160, 960, 1, activation=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(960, 1280), nn.Hardswish(inplace=True), nn.Dropout(dropout, inplace=True),
                                        nn.Linear(1280, num_classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v3_large(num_classes=1000):
    return MobileNetV3(num_classes)
