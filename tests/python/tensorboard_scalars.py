"""Prints every scalar of the TensorBoard event files under a directory as
JSON, read with TensorBoard's own loader: {run: {tag: [[step, value], ...]}}.
(tests/curves.rs compares them with metrics.jsonl and eval.jsonl.)"""
import json
import sys

from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

mux = EventMultiplexer(size_guidance={"scalars": 0})
mux.AddRunsFromDirectory(sys.argv[1])
mux.Reload()
out = {}
for run, tags in mux.Runs().items():
    out[run] = {
        tag: [[e.step, e.value] for e in mux.Scalars(run, tag)]
        for tag in tags.get("scalars", [])
    }
print(json.dumps(out))
