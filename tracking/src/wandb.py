"""Weights & Biases for sebulba's tracker (tracking/src/wandb.rs): one run
per run directory, every number logged against `env_steps` (W&B's own
`_step` counts log calls), videos as `eval/video`, the summary, weights and
configuration saved with the run at the end.

Where there are no credentials (no WANDB_API_KEY, no `wandb login`) and
WANDB_MODE is unset, the run is offline: `wandb sync` uploads it later."""

import json
import netrc
import os

import wandb


def _logged_in():
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


def mode():
    return os.environ.get("WANDB_MODE") or ("online" if _logged_in() else "offline")


class Tracker:
    def __init__(self, project, name, run_id, directory):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.run = wandb.init(
            project=project or os.environ.get("WANDB_PROJECT") or "sebulba",
            name=name,
            id=run_id,
            resume="allow",
            dir=directory,
            mode=mode(),
            # The tracker is a thread of a training process: its console is
            # the process's own, not W&B's to capture.
            settings=wandb.Settings(console="off"),
        )
        self.run.define_metric("env_steps")
        for prefix in ("train", "eval", "summary"):
            self.run.define_metric(f"{prefix}/*", step_metric="env_steps")

    def config(self, params_json):
        self.run.config.update(dict(json.loads(params_json)), allow_val_change=True)

    def log(self, lines_json):
        for step, values in json.loads(lines_json):
            row = dict(values)
            row["env_steps"] = step
            self.run.log(row)

    def video(self, step, path, caption):
        fmt = os.path.splitext(path)[1].lstrip(".") or None
        self.run.log({"env_steps": step, "eval/video": wandb.Video(path, caption=caption, format=fmt)})

    def finish(self, summary_json, run_dir, files, exit_code):
        summary = json.loads(summary_json)
        if summary:
            self.run.summary.update(summary)
        for f in files:
            self.run.save(os.path.join(run_dir, f), base_path=run_dir, policy="now")
        self.run.finish(exit_code=exit_code)
