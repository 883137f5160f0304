"""Small models for train-mode forwards: an MLP and a CNN with BatchNorm and Dropout(p=0).

An ordinary PyTorch model file: only the import lines differ from a torch version.
"""
import flow as torch  # noqa: F401
import flow.nn as nn


class MLP(nn.Module):
    def __init__(self, d_in=32, hidden=64, d_out=10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.0),
            nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden),
            nn.Linear(hidden, d_out),
        )

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding="same"), nn.BatchNorm2d(32, momentum=None), nn.SiLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=4), nn.GroupNorm(4, 32), nn.Hardswish(),
            nn.AvgPool2d(2),
            nn.Dropout(p=0.0),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32, num_classes))

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)))
