"""Reads an offline Weights & Biases run back with wandb's own reader of its
transaction log (`run-<id>.wandb`), for tests/trackers.rs: prints JSON with
the run's project and name, config, history rows, summary, the files saved
with it, and its exit code.

usage: wandb_read.py RUN_FILE"""

import json
import sys

from wandb.proto import wandb_internal_pb2 as pb
from wandb.sdk.internal import datastore


def value(item):
    return json.loads(item.value_json)


def key(item):
    return item.key or "/".join(item.nested_key)


def main():
    store = datastore.DataStore()
    store.open_for_scan(sys.argv[1])
    out = {"history": [], "config": {}, "summary": {}, "files": [], "exit_code": None}
    while True:
        data = store.scan_data()
        if data is None:
            break
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["project"] = record.run.project
            out["name"] = record.run.display_name
            out["id"] = record.run.run_id
            for u in record.run.config.update:
                out["config"][key(u)] = value(u)
        elif kind == "config":
            for u in record.config.update:
                out["config"][key(u)] = value(u)
        elif kind == "history":
            out["history"].append({key(i): value(i) for i in record.history.item})
        elif kind == "summary":
            for u in record.summary.update:
                out["summary"][key(u)] = value(u)
        elif kind == "files":
            out["files"].extend(f.path for f in record.files.files)
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    print(json.dumps(out))


if __name__ == "__main__":
    main()
