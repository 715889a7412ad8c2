"""Reads a run back from an MLflow tracking server with MLflow's own client
(its REST API), for tests/trackers.rs: prints JSON with the run's status,
params, every metric's full history and every artifact (path, size).

usage: mlflow_read.py TRACKING_URI RUN_ID"""

import json
import sys

from mlflow.tracking import MlflowClient


def artifacts(client, run_id, path=None):
    out = []
    for f in client.list_artifacts(run_id, path):
        if f.is_dir:
            out.extend(artifacts(client, run_id, f.path))
        else:
            out.append({"path": f.path, "size": f.file_size})
    return out


def main():
    uri, run_id = sys.argv[1], sys.argv[2]
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    history = {
        key: [{"step": m.step, "value": m.value, "timestamp": m.timestamp}
              for m in client.get_metric_history(run_id, key)]
        for key in run.data.metrics
    }
    experiment = client.get_experiment(run.info.experiment_id)
    print(json.dumps({
        "status": run.info.status,
        "name": run.info.run_name,
        "experiment": experiment.name,
        "params": run.data.params,
        "tags": run.data.tags,
        "metrics": history,
        "artifacts": artifacts(client, run_id),
    }))


if __name__ == "__main__":
    main()
