"""An EfficientNet-B0-style classifier (torchvision's layout): MBConv blocks with SiLU, depthwise
convolutions, squeeze-and-excitation with a sigmoid gate, stochastic depth (an identity in eval
mode, a per-sample Bernoulli mask in training) and a Dropout classifier.

An ordinary PyTorch model file: only the import lines differ from a torch version.
"""
import flow as torch
import flow.nn as nn


def stochastic_depth(x, p, training):
    if not training or p == 0.0:
        return x
    keep = 1.0 - p
    noise = torch.empty([x.shape[0]] + [1] * (x.dim() - 1), dtype=x.dtype, device=x.device).bernoulli_(keep)
    return x * noise.div_(keep)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.SiLU()
        self.scale_activation = nn.Sigmoid()

    def forward(self, x):
        s = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return s * x


def conv_bn(cin, cout, kernel, stride=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)]
    if act:
        layers.append(nn.SiLU(inplace=True))
    return nn.Sequential(*layers)


class MBConv(nn.Module):
    def __init__(self, expand_ratio, kernel, stride, cin, cout, stochastic_depth_prob):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        expanded = cin * expand_ratio
        layers = []
        if expanded != cin:
            layers.append(conv_bn(cin, expanded, 1))
        layers.append(conv_bn(expanded, expanded, kernel, stride, groups=expanded))
        layers.append(SqueezeExcitation(expanded, max(1, cin // 4)))
        layers.append(conv_bn(expanded, cout, 1, act=False))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth_prob = stochastic_depth_prob

    def forward(self, x):
        y = self.block(x)
        if self.use_res_connect:
            y = stochastic_depth(y, self.stochastic_depth_prob, self.training) + x
        return y


B0 = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3),
      (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]  # expand ratio, kernel, stride, input, output, layers


class EfficientNet(nn.Module):
    def __init__(self, num_classes=1000, dropout=0.2, stochastic_depth_prob=0.2):
        super().__init__()
        layers = [conv_bn(3, 32, 3, stride=2)]
        total = sum(cfg[-1] for cfg in B0)
        block_id = 0
        for expand, kernel, stride, cin, cout, repeats in B0:
            stage = []
            for i in range(repeats):
                p = stochastic_depth_prob * block_id / total
                stage.append(MBConv(expand, kernel, stride if i == 0 else 1, cin if i == 0 else cout, cout, p))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        layers.append(conv_bn(320, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(1280, num_classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def efficientnet_b0(num_classes=1000):
    return EfficientNet(num_classes)
