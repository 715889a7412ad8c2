"""An independent forward pass of a published `final.safetensors`, in NumPy
with PyTorch's conventions, for tests/local_minatar.rs and tests/local_atari.rs.

  python numpy_forward.py FILE CASE.json

CASE.json holds {"image": [H, W, C], "conv": [[channels, kernel, stride,
padding], ...], "stacks": [[channels, blocks], ...] (the IMPALA ResNet's),
"activation": "relu" | "tanh", "obs": [[...], ...] (rows,
channels last as envs give them), "logits": [[...], ...] (sebulba's),
and for a recurrent core "core": "lstm" | "gru", "envs": E, "starts":
[...] (the rows are steps of E envs, time-major; 1 where an episode starts,
the state zeroed first), and "torch": true to run the core through
PyTorch's own module instead (`torch_core`); "image" null for a flat
observation}. The
file is read by hand (an 8-byte header length, a JSON header, raw
little-endian f32); its metadata's model spec gives the input scale
(`input_scale`, 1/255 for Atari's bytes; applied when there is no
normaliser). The actor torso: convolutions on NCHW tensors with
weights [out, in, kh, kw] (`actor.conv.K`); each IMPALA stack a 3x3
convolution (padding 1), a 3x3 max-pool with stride 2 (padding 1, which
never wins) and residual blocks x + conv1(act(conv0(act(x))))
(`actor.res.K.conv0`, `.conv1`), the activation after the last stack;
flattened channels first, then dense layers
`x @ W + b` (W stored [in, out]), then the recurrent core as torch.nn.LSTM
or torch.nn.GRU computes it from `actor.core.0.weight_ih_l0` ([gates * H,
in], gates i, f, g, o or r, z, n), `weight_hh_l0`, `bias_ih_l0`,
`bias_hh_l0`, each env's state carried from row to row, then the policy
head. Prints one JSON line with the largest difference from sebulba's
logits.
"""
import json
import struct
import sys

import numpy as np


def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            spec = json.loads(t.get("sebulba.model_spec", "{}"))
            out["input_scale"] = float(spec.get("input_scale", 1.0))
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    return out


def conv2d(x, w, b, stride, pad):
    """x [N, C, H, W], w [O, C, kh, kw]: the cross-correlation PyTorch's Conv2d computes."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            window = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.einsum("nckl,ockl->no", window, w) + b
    return y


def max_pool(x, k, stride, pad):
    """x [N, C, H, W]: PyTorch's max_pool2d, the padding -inf."""
    n, c, h, wd = x.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    oh = (h + 2 * pad - k) // stride + 1
    ow = (wd + 2 * pad - k) // stride + 1
    y = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = x[:, :, i * stride:i * stride + k, j * stride:j * stride + k].max(axis=(2, 3))
    return y


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def core(t, kind, x, envs, starts):
    """Each row's h: rows are steps of `envs` envs, time-major."""
    p = "actor.core.0."
    w_ih, w_hh = t[p + "weight_ih_l0"], t[p + "weight_hh_l0"]
    b_ih, b_hh = t[p + "bias_ih_l0"], t[p + "bias_hh_l0"]
    size = w_hh.shape[1]
    h = np.zeros((envs, size))
    c = np.zeros((envs, size))
    out = np.empty((len(x), size))
    for row in range(len(x)):
        e = row % envs
        if starts[row]:
            h[e] = 0.0
            c[e] = 0.0
        gi = w_ih @ x[row] + b_ih
        gh = w_hh @ h[e] + b_hh
        if kind == "lstm":
            a = gi + gh
            i, f, g, o = (a[k * size:(k + 1) * size] for k in range(4))
            c[e] = sigmoid(f) * c[e] + sigmoid(i) * np.tanh(g)
            h[e] = sigmoid(o) * np.tanh(c[e])
        else:
            r = sigmoid(gi[:size] + gh[:size])
            z = sigmoid(gi[size:2 * size] + gh[size:2 * size])
            n = np.tanh(gi[2 * size:] + r * gh[2 * size:])
            h[e] = (1.0 - z) * n + z * h[e]
        out[row] = h[e]
    return out


def torch_core(t, kind, x, envs, starts):
    """`core`'s rows through PyTorch itself: a torch.nn.LSTM or nn.GRU that
    takes the file's `actor.core.0.*` tensors by `load_state_dict` (strict:
    PyTorch's names and shapes), one step at a time, each env's (h, c)
    dropped where its episode starts."""
    import torch

    p = "actor.core.0."
    state = {k[len(p):]: torch.from_numpy(np.asarray(v, np.float64)) for k, v in t.items() if k.startswith(p)}
    size = state["weight_hh_l0"].shape[1]
    module = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(x.shape[1], size).double()
    module.load_state_dict(state)
    out = np.empty((len(x), size))
    held = [None] * envs
    with torch.no_grad():
        for row in range(len(x)):
            e = row % envs
            if starts[row]:
                held[e] = None
            y, held[e] = module(torch.from_numpy(np.asarray(x[row], np.float64)).view(1, 1, -1), held[e])
            out[row] = y.view(-1).numpy()
    return out


def main():
    t = read(sys.argv[1])
    case = json.load(open(sys.argv[2]))
    act = (lambda v: np.maximum(v, 0.0)) if case["activation"] == "relu" else np.tanh
    obs = np.asarray(case["obs"], dtype=np.float64)
    if "obs_norm.mean" in t:
        std = np.sqrt(t["obs_norm.var"] + 1e-8)
        obs = np.clip((obs - t["obs_norm.mean"]) / std, -1e9, 1e9)
    else:
        obs = obs * t.get("input_scale", 1.0)
    if case["image"] is not None:
        h, w, c = case["image"]
        x = obs.reshape(len(obs), h, w, c).transpose(0, 3, 1, 2)
    else:
        x = obs
    for i, (_, _, stride, pad) in enumerate(case["conv"]):
        x = act(conv2d(x, t[f"actor.conv.{i}.weight"], t[f"actor.conv.{i}.bias"], stride, pad))
    conv, res = len(case["conv"]), 0
    for _, blocks in case.get("stacks", []):
        x = conv2d(x, t[f"actor.conv.{conv}.weight"], t[f"actor.conv.{conv}.bias"], 1, 1)
        conv += 1
        x = max_pool(x, 3, 2, 1)
        for _ in range(blocks):
            r = f"actor.res.{res}"
            h = conv2d(act(x), t[f"{r}.conv0.weight"], t[f"{r}.conv0.bias"], 1, 1)
            x = x + conv2d(act(h), t[f"{r}.conv1.weight"], t[f"{r}.conv1.bias"], 1, 1)
            res += 1
    if case.get("stacks"):
        x = act(x)
    x = x.reshape(len(x), -1)
    i = 0
    while f"actor.layers.{i}.weight" in t:
        x = act(x @ t[f"actor.layers.{i}.weight"] + t[f"actor.layers.{i}.bias"])
        i += 1
    if case.get("core"):
        through = torch_core if case.get("torch") else core
        x = through(t, case["core"], x, case["envs"], case["starts"])
    logits = x @ t["policy_head.weight"] + t["policy_head.bias"]
    diff = np.abs(logits - np.asarray(case["logits"])).max()
    print(json.dumps({"max_abs_diff": float(diff), "rows": len(obs), "max_abs_logit": float(np.abs(logits).max())}))


if __name__ == "__main__":
    main()
