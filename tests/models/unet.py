"""A small U-Net and a YOLO-style neck: transposed convolutions and nearest/bilinear upsampling,
skip connections concatenated along channels, an SPPF block (max pools of 5x5, stride 1, padding
2, chained and concatenated), SiLU and GroupNorm.

An ordinary PyTorch model file: only the import lines differ from a torch version.
"""
import flow as torch
import flow.nn as nn
import flow.nn.functional as F


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.GroupNorm(4, cout), nn.SiLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SPPF(nn.Module):
    def __init__(self, cin, cout, k=5):
        super().__init__()
        hidden = cin // 2
        self.cv1 = nn.Sequential(nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.SiLU())
        self.cv2 = nn.Sequential(nn.Conv2d(hidden * 4, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU())
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class UNet(nn.Module):
    def __init__(self, cin=3, classes=2, width=16):
        super().__init__()
        w = width
        self.enc1, self.enc2, self.enc3 = conv_block(cin, w), conv_block(w, 2 * w), conv_block(2 * w, 4 * w)
        self.pool = nn.MaxPool2d(2)
        self.sppf = SPPF(4 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = conv_block(4 * w, 2 * w)
        self.dec1 = conv_block(3 * w, w)
        self.head = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        e3 = self.sppf(self.enc3(self.pool(e2)))
        d2 = self.dec2(torch.cat([self.up2(e3), e2], dim=1))
        up = F.interpolate(d2, scale_factor=2, mode="nearest")
        d1 = self.dec1(torch.cat([up, e1], dim=1))
        logits = self.head(d1)
        return F.interpolate(logits, size=(x.shape[2] * 2, x.shape[3] * 2), mode="bilinear", align_corners=False)


def unet(classes=2):
    return UNet(classes=classes)
