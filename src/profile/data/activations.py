"""Activation memory per training sample for the models of models.csv.

The arithmetic behind the `act_mib_per_sample` column (see README.md, "GPU
memory estimate"); run `python3 activations.py` to print it. Counts are
elements of tensors kept for the backward pass of ONE sample, at fp32 (4 B).

CNN rule: every conv / linear output is counted twice (x2): with BatchNorm
(or InstanceNorm) + in-place ReLU, autograd keeps the conv output (input of
the norm's backward) and the norm/ReLU output (ReLU's backward and the next
conv's input); without a norm (AlexNet, VGG) the second tensor stands for the
max-pool indices (int64) and dropout masks. Transformers: Korthikanti et al.,
"Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023,
arXiv:2205.05198), eq. 1, 34sbh + 5as^2b bytes per layer with 16-bit
activations and 1-byte dropout masks; with fp32 activations the 2-byte terms
double and the masks stay: attention 21sh + 9as^2, MLP 37sh, 2 LayerNorms 8sh,
so 66sh + 9as^2 bytes per layer per sample.
"""

MIB = 2**20


def conv_out(h, k, s, p):
    return (h + 2 * p - k) // s + 1


def resnet_torchvision(blocks, H, classes=1000):
    """torchvision bottleneck ResNet (50: [3,4,6,3], 101: [3,4,23,3]):
    conv / fc output elements per sample."""
    h = conv_out(H, 7, 2, 3)
    tot = 64 * h * h  # conv1
    h = conv_out(h, 3, 2, 1)  # max pool
    inpl = 64
    for i, (n, w) in enumerate(zip(blocks, [64, 128, 256, 512])):
        for b in range(n):
            s = 2 if (b == 0 and i > 0) else 1
            ho = conv_out(h, 3, s, 1)
            tot += w * h * h + w * ho * ho + 4 * w * ho * ho  # 1x1, 3x3, 1x1
            if b == 0:
                tot += 4 * w * ho * ho  # downsample
            inpl, h = 4 * w, ho
    return tot + classes


def resnet18_cifar():
    """kuangliu/pytorch-cifar ResNet18: 3x3 stem, no max pool, 32x32."""
    tot, h, inpl = 64 * 32 * 32, 32, 64
    for i, w in enumerate([64, 128, 256, 512]):
        for b in range(2):
            s = 2 if (b == 0 and i > 0) else 1
            ho = h // s
            tot += 2 * w * ho * ho
            if s != 1 or inpl != w:
                tot += w * ho * ho  # shortcut conv
            inpl, h = w, ho
    return tot + 10


def vgg16():
    tot, h = 0, 224
    for stage in [[64, 64], [128, 128], [256] * 3, [512] * 3, [512] * 3]:
        tot += sum(c * h * h for c in stage)
        h //= 2
    return tot + 4096 + 4096 + 1000


def alexnet():
    """torchvision alexnet."""
    h = conv_out(224, 11, 4, 2)
    tot = 64 * h * h
    h = conv_out(h, 3, 2, 0)
    h = conv_out(h, 5, 1, 2)
    tot += 192 * h * h
    h = conv_out(h, 3, 2, 0)
    tot += (384 + 256 + 256) * h * h
    return tot + 4096 + 4096 + 1000


def mobilenetv2():
    """torchvision mobilenet_v2 at 224x224."""
    h, c = 112, 32
    tot = 32 * h * h
    for t, co, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            st = s if i == 0 else 1
            hid = c * t
            if t != 1:
                tot += hid * h * h  # expand 1x1
            ho = (h + st - 1) // st
            tot += hid * ho * ho + co * ho * ho  # depthwise 3x3, project 1x1
            c, h = co, ho
    return tot + 1280 * h * h + 1000


def yolov3(H=448, classes=20):
    """Darknet-53 backbone + the three YOLOv3 heads (3 anchors x (5 + classes))."""
    tot, h = 32 * H * H, H
    for n, c in [(1, 64), (2, 128), (8, 256), (8, 512), (4, 1024)]:
        h //= 2
        tot += c * h * h + n * (c // 2 + c) * h * h
    for c, hh in [(512, H // 32), (256, H // 16), (128, H // 8)]:
        tot += (3 * c + 3 * 2 * c + 3 * (5 + classes)) * hh * hh
        if c > 128:
            tot += (c // 2) * hh * hh  # 1x1 conv before the upsample
    return tot


def cyclegan_step():
    """PyTorch-GAN CycleGAN at 256x256: ResNet generator (9 blocks), 70x70
    PatchGAN; the generator step runs 6 generator passes (2 identity, 2
    translations, 2 cycles) and 2 discriminator passes."""
    g = 64 * 256**2 + 128 * 128**2 + 256 * 64**2 + 9 * 2 * 256 * 64**2 + 128 * 128**2 + 64 * 256**2 + 3 * 256**2
    d = 64 * 128**2 + 128 * 64**2 + 256 * 32**2 + 512 * 16**2 + 16**2
    return 6 * g + 2 * d


def a3c_step():
    """dgriff777/rl_a3c_pytorch A3Clstm, one 1x80x80 step: 4 convs, LSTMCell
    (4 gates + c + h of 512), critic and 6 actor outputs."""
    return 32 * 80 * 80 + 32 * 38 * 38 + 64 * 18 * 18 + 64 * 9 * 9 + 4 * 512 + 512 + 1 + 6


def tlayer(s, h, a):
    """Bytes per transformer layer per sample, fp32 (see the module doc)."""
    return 66 * s * h + 9 * a * s * s


def transformer(s, h, a, layers):
    """Encoder stack plus embedding output and final LayerNorm (2 s h fp32)."""
    return layers * tlayer(s, h, a) + 2 * 4 * s * h


CNN = {
    "a3c-pong": a3c_step,
    "alexnet-imagenet": alexnet,
    "cyclegan-monet2photo": cyclegan_step,
    "mobilenetv2-imagenet": mobilenetv2,
    "resnet101-imagenet": lambda: resnet_torchvision([3, 4, 23, 3], 224),
    "resnet18-cifar10": resnet18_cifar,
    # torchvision resnet50 at 32x32 (stride-2 stem and max pool kept), 10 classes
    "resnet50-cifar10": lambda: resnet_torchvision([3, 4, 6, 3], 32, 10),
    "resnet50-imagenet": lambda: resnet_torchvision([3, 4, 6, 3], 224),
    "vgg16-imagenet": vgg16,
    "yolov3-voc": yolov3,
}


def main():
    out = {name: 2 * 4 * f() for name, f in CNN.items()}
    out["bert-squad"] = transformer(384, 768, 12, 12)
    out["bert-large-cola"] = transformer(128, 1024, 16, 24)  # 128 tokens assumed
    out["gpt2-imdb"] = transformer(60, 768, 12, 12)
    # 6 encoder + 6 decoder layers (decoder adds cross-attention 21sh + 9as^2),
    # logits + log-softmax over a 10,000-word vocabulary (assumed), 32 tokens (assumed)
    s, h, a = 32, 512, 8
    out["transformer-multi30k"] = 6 * tlayer(s, h, a) + 6 * (tlayer(s, h, a) + 21 * s * h + 9 * a * s * s) + 8 * 10000 * s + 2 * 4 * s * h * 2
    # per token: embedding 200, 2 LSTM layers x (4 gates + c + h) x 200, logits and log-softmax over 33,278 words; 35 tokens
    out["lstm-wikitext2"] = 4 * 35 * (200 + 2 * 6 * 200 + 2 * 33278)
    # GMF embeddings 2x32, MLP embeddings 2x128 and their concat 256, MLP 128/64/32 (linear + ReLU), GMF product 32, concat 64, output 1
    out["ncf-ml1m"] = 4 * (64 + 256 + 256 + 2 * (128 + 64 + 32) + 32 + 64 + 1)
    # deepspeech.pytorch: 161 bins, 3 s utterance assumed = 150 frames after the time stride 2;
    # 2 convs (32 x 81 and 32 x 41 bins) x2, 5 BiGRU of 800 (4 gate tensors per direction), 4 sequence BatchNorms, 29 outputs
    T = 150
    out["deepspeech2-cmuarctic"] = 4 * (2 * (32 * 81 * T + 32 * 41 * T) + 5 * T * 2 * 4 * 800 + 4 * T * 800 + T * 29)
    # ElasticFlow's model: 128 mel bins, 635 frames after stride 2 (12.7 s mean utterance), first conv 32 x 64 bins,
    # 3 residual blocks x 2 convs x (LayerNorm, GELU, conv outputs), fc 512, 5 BiGRU of 512 (LayerNorm + GELU on a
    # 1,024-wide input, 4 gate tensors per direction), classifier 512 + 512 + 29
    T = 635
    out["deepspeech2-librispeech"] = 4 * (32 * 64 * T + 3 * 2 * 3 * 32 * 64 * T + T * 512 + 5 * (2 * T * 1024 + T * 2 * 4 * 512) + T * (512 + 512 + 29))
    for name in sorted(out):
        print(f"{name:24} {out[name] / MIB:.6g} MiB per sample")


if __name__ == "__main__":
    main()
