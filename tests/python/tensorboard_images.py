"""Prints every image of the TensorBoard event files under a directory as
JSON, read with TensorBoard's own loader: {run: {tag: [[step, width,
height, frames], ...]}}, frames counted by Pillow in the encoded picture
(tests/videos.rs compares them with videos/videos.jsonl)."""
import io
import json
import sys

from PIL import Image
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

mux = EventMultiplexer(size_guidance={"images": 0})
mux.AddRunsFromDirectory(sys.argv[1])
mux.Reload()
out = {}
for run, tags in mux.Runs().items():
    out[run] = {}
    for tag in tags.get("images", []):
        points = []
        for e in mux.Images(run, tag):
            picture = Image.open(io.BytesIO(e.encoded_image_string))
            points.append([e.step, e.width, e.height, getattr(picture, "n_frames", 1)])
        out[run][tag] = points
print(json.dumps(out))
