"""A sebulba policy as a PyTorch module: written by `sebulba export --format
torch` beside `model.safetensors` (the weights in PyTorch's layouts),
`network.json` (the network) and `check.safetensors` (sebulba's own outputs
for a few observations). Needs only torch.

    import sebulba_policy
    policy = sebulba_policy.load("DIR")          # a torch.nn.Module, eval mode
    state = policy.initial_state(n)              # [n, state_width]
    head, value, state = policy(obs, state)      # obs [n, obs_dim] float32
    action = policy.act(head)                    # the distribution's mode

`obs` holds observations as the env gives them, each flattened (an image
channels last, `[H, W, C]`; Atari's bytes as floats 0 to 255): the module
normalises or scales them itself, as sebulba does. `head` is the policy
head's raw output: logits for a discrete action space (Q-values for a DQN
run), and for a box the Gaussian's means, then the raw values of its
standard deviations (`softplus(raw) + min_std`), the env's action being
`center + half_width * tanh(u)`. `value` is the critic's state value.

A network with a recurrent core carries `state` from step to step, one row
per env: zero an env's row where its episode starts. A row holds each
core's carried vectors, the actor torso's cores first, then the critic's
(when it has a torso of its own): an LSTM's `h` then `c`, a GRU's `h`, each
`size` floats. A network without one has `state_width` 0: pass `None`.

    python sebulba_policy.py DIR

runs the module on `check.safetensors`'s observations and prints the
largest differences from sebulba's outputs as JSON (exit status 1 past
1e-5 of the outputs' scale).
"""
import json
import math
import os
import struct
import sys

import torch
from torch import nn
from torch.nn import functional as F


def read_safetensors(path):
    """Every tensor of a safetensors file of F32 tensors, by name."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = bytearray(raw[8 + n:])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError(f"{name}: dtype {t['dtype']}, only F32 is read")
        a, b = t["data_offsets"]
        flat = torch.frombuffer(data[a:b], dtype=torch.float32) if b > a else torch.zeros(0)
        out[name] = flat.reshape(t["shape"]).clone()
    return out


def activation(name):
    return {"tanh": torch.tanh, "relu": F.relu}[name]


def out_size(size, kernel, stride, padding):
    return (size + 2 * padding - kernel) // stride + 1


class Residual(nn.Module):
    """`x + conv1(act(conv0(act(x))))`, both 3x3 with padding 1."""

    def __init__(self, channels, act):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.act = act

    def forward(self, x):
        return x + self.conv1(self.act(self.conv0(self.act(x))))


class Torso(nn.Module):
    """`network.json`'s blocks, input side first. Parameters sit in the
    lists sebulba names them by (`conv`, `res`, `layers`, `core`), so the
    state dict's keys are the published file's."""

    def __init__(self, blocks, image, obs_dim, act):
        super().__init__()
        self.conv, self.res = nn.ModuleList(), nn.ModuleList()
        self.layers, self.core = nn.ModuleList(), nn.ModuleList()
        self.act = act
        # What flows: an image (channels, height, width) or a width.
        shape = (image[2], image[0], image[1]) if image else obs_dim
        self.steps = []
        self.state_width = 0
        for b in blocks:
            kind = b["kind"]
            if kind == "conv":
                c, h, w = shape
                layer = b["layer"]
                k, s, p = layer["kernel"], layer["stride"], layer["padding"]
                self.steps.append(("conv", len(self.conv), b["activate"]))
                self.conv.append(nn.Conv2d(c, layer["channels"], k, stride=s, padding=p))
                shape = (layer["channels"], out_size(h, k, s, p), out_size(w, k, s, p))
            elif kind == "max_pool":
                c, h, w = shape
                k, s, p = b["kernel"], b["stride"], b["padding"]
                self.steps.append(("max_pool", (k, s, p), None))
                shape = (c, out_size(h, k, s, p), out_size(w, k, s, p))
            elif kind == "residual":
                self.steps.append(("res", len(self.res), None))
                self.res.append(Residual(shape[0], act))
            elif kind == "activate":
                self.steps.append(("activate", None, None))
            elif kind == "dense":
                d_in = shape if isinstance(shape, int) else math.prod(shape)
                self.steps.append(("dense", len(self.layers), None))
                self.layers.append(nn.Linear(d_in, b["width"]))
                shape = b["width"]
            elif kind == "recurrent":
                d_in = shape if isinstance(shape, int) else math.prod(shape)
                cell, size = b["cell"], b["size"]
                module = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](d_in, size)
                carried = 2 if cell == "lstm" else 1
                at = (self.state_width, cell, size)
                self.steps.append(("core", len(self.core), at))
                self.core.append(module)
                self.state_width += carried * size
                shape = size
            else:
                raise ValueError(f"unknown block {kind!r}")
        self.width = shape if isinstance(shape, int) else math.prod(shape)

    def forward(self, x, state):
        """`x` [n, features] (an image's already NCHW), `state` [n,
        state_width]: the output rows and the state moved on."""
        new_state = []
        for kind, i, extra in self.steps:
            if kind == "conv":
                x = self.conv[i](x)
                x = self.act(x) if extra else x
            elif kind == "max_pool":
                k, s, p = i
                x = F.max_pool2d(x, k, stride=s, padding=p)
            elif kind == "res":
                x = self.res[i](x)
            elif kind == "activate":
                x = self.act(x)
            elif kind == "dense":
                x = self.act(self.layers[i](x.flatten(1)))
            else:
                at, cell, size = extra
                x = x.flatten(1).unsqueeze(0)
                h0 = state[:, at:at + size].unsqueeze(0).contiguous()
                if cell == "lstm":
                    c0 = state[:, at + size:at + 2 * size].unsqueeze(0).contiguous()
                    out, (h, c) = self.core[i](x, (h0, c0))
                    new_state += [h[0], c[0]]
                else:
                    out, h = self.core[i](x, h0)
                    new_state.append(h[0])
                x = out[0]
        moved = torch.cat(new_state, dim=1) if new_state else state[:, :0]
        return x.flatten(1), moved


class ObsNorm(nn.Module):
    """`clamp((x - mean) / sqrt(var + eps), -clip, clip)`, per feature."""

    def __init__(self, obs_dim, clip, eps):
        super().__init__()
        self.register_buffer("mean", torch.zeros(obs_dim))
        self.register_buffer("var", torch.ones(obs_dim))
        self.clip, self.eps = clip, eps

    def forward(self, x):
        return ((x - self.mean) / torch.sqrt(self.var + self.eps)).clamp(-self.clip, self.clip)


class Policy(nn.Module):
    """The actor-critic network `network.json` describes."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        act = activation(net["activation"])
        image, obs_dim = net["image"], net["obs_dim"]
        norm = net["obs_norm"]
        if norm is not None:
            self.obs_norm = ObsNorm(obs_dim, norm["clip"], norm["eps"])
        self.input_scale = net["input_scale"]
        self.actor = Torso(net["torso"], image, obs_dim, act)
        self.critic = None if net["shared_torso"] else Torso(net["torso"], image, obs_dim, act)
        self.policy_head = nn.Linear(self.actor.width, net["head_dim"])
        top = self.actor if self.critic is None else self.critic
        self.value_head = nn.Linear(top.width, 1)
        self.state_width = net["state_width"]

    def initial_state(self, n):
        """The state of `n` envs at an episode's first step."""
        return torch.zeros(n, self.state_width)

    def forward(self, obs, state=None):
        """`obs` [n, obs_dim] as the env gives it; `state` [n, state_width]
        (None: every env at an episode's first step). Returns the policy
        head's raw output [n, head_dim], the value [n] and the state after
        this step."""
        x = obs.float()
        if state is None:
            state = self.initial_state(x.shape[0])
        x = self.obs_norm(x) if hasattr(self, "obs_norm") else x * self.input_scale
        image = self.net["image"]
        if image:
            x = x.reshape(-1, image[0], image[1], image[2]).permute(0, 3, 1, 2)
        ha, actor_state = self.actor(x, state[:, :self.actor.state_width])
        head = self.policy_head(ha)
        if self.critic is None:
            hv, critic_state = ha, state[:, :0]
        else:
            hv, critic_state = self.critic(x, state[:, self.actor.state_width:])
        value = self.value_head(hv)[:, 0]
        return head, value, torch.cat([actor_state, critic_state], dim=1)

    def act(self, head):
        """The action distribution's mode: the largest logit's index for a
        discrete space; `center + half_width * tanh(mean)` for a box."""
        space = self.net["action_space"]
        if "discrete" in space:
            return head.argmax(dim=1)
        low = torch.tensor(space["box"]["low"])
        high = torch.tensor(space["box"]["high"])
        mean = head[:, :low.shape[0]]
        return (high + low) / 2 + (high - low) / 2 * torch.tanh(mean)


def load(directory):
    """The exported policy in `directory`, its weights loaded, in eval mode."""
    with open(os.path.join(directory, "network.json")) as f:
        net = json.load(f)
    policy = Policy(net)
    policy.load_state_dict(read_safetensors(os.path.join(directory, "model.safetensors")))
    return policy.eval()


def check(directory):
    """The module against sebulba's outputs in `check.safetensors`: the
    largest absolute differences and the outputs' scale."""
    policy = load(directory)
    c = read_safetensors(os.path.join(directory, "check.safetensors"))
    obs, starts = c["obs"], c["starts"]
    steps, envs = starts.shape
    state = policy.initial_state(envs)
    diff = {"head": 0.0, "value": 0.0}
    scale = 0.0
    with torch.no_grad():
        for t in range(steps):
            state[starts[t] > 0] = 0.0
            head, value, state = policy(obs[t], state)
            for name, ours in (("head", head), ("value", value)):
                theirs = c[name][t]
                diff[name] = max(diff[name], (ours - theirs).abs().max().item())
                scale = max(scale, theirs.abs().max().item())
    return {"max_abs_diff_head": diff["head"], "max_abs_diff_value": diff["value"],
            "scale": scale, "steps": steps, "envs": envs}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python sebulba_policy.py DIR")
    result = check(sys.argv[1])
    print(json.dumps(result))
    worst = max(result["max_abs_diff_head"], result["max_abs_diff_value"])
    sys.exit(0 if worst <= 1e-5 * (1.0 + result["scale"]) else 1)
