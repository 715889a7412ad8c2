"""Runs `policy.onnx`, written by `sebulba export --format onnx`, with
onnxruntime on `check.safetensors` (observations for a few steps of a few
envs, where episodes start, and sebulba's own outputs for them), each env's
recurrent state carried from step to step and zeroed where its episode
starts, and prints the largest differences from sebulba's outputs as JSON
(exit status 1 past 1e-5 of the outputs' scale). Needs onnxruntime and
numpy.

    python check_onnx.py DIR

The model's inputs: `obs` [batch, obs_dim] (as the env gives it, each
observation flattened) and, with a recurrent core, `state` [batch,
state_width]; its outputs: `head`, `value` [batch] and `state_out`.
"""
import json
import os
import struct
import sys

import numpy as np
import onnxruntime as ort


def read_safetensors(path):
    """Every tensor of a safetensors file of F32 tensors, by name."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(t["shape"])
    return out


def check(directory):
    session = ort.InferenceSession(os.path.join(directory, "policy.onnx"),
                                   providers=["CPUExecutionProvider"])
    c = read_safetensors(os.path.join(directory, "check.safetensors"))
    obs, starts = c["obs"], c["starts"]
    steps, envs = starts.shape
    inputs = {i.name: i for i in session.get_inputs()}
    width = inputs["state"].shape[1] if "state" in inputs else 0
    state = np.zeros((envs, width), dtype=np.float32)
    diff = {"head": 0.0, "value": 0.0}
    scale = 0.0
    for t in range(steps):
        state[starts[t] > 0] = 0.0
        feeds = {"obs": np.ascontiguousarray(obs[t])}
        if width:
            feeds["state"] = state
        names = ["head", "value"] + (["state_out"] if width else [])
        outs = dict(zip(names, session.run(names, feeds)))
        for name in ("head", "value"):
            theirs = c[name][t]
            diff[name] = max(diff[name], float(np.abs(outs[name] - theirs).max()))
            scale = max(scale, float(np.abs(theirs).max()))
        if width:
            state = outs["state_out"]
    return {"max_abs_diff_head": diff["head"], "max_abs_diff_value": diff["value"],
            "scale": scale, "steps": steps, "envs": envs}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python check_onnx.py DIR")
    result = check(sys.argv[1])
    print(json.dumps(result))
    worst = max(result["max_abs_diff_head"], result["max_abs_diff_value"])
    sys.exit(0 if worst <= 1e-5 * (1.0 + result["scale"]) else 1)
