"""Does `edgecnn batch` scale with the cores, and does it keep up with the engine's own inference?

Issue 33 asks that `edgecnn batch` over 2,000 images with the bundled face classifier and over 200
with the ResNet-50 of the benchmark zoo reach at least 1.8x the single-process, one-core
throughput with 2 workers, and come within 10% of the model's pure inference throughput measured
by `edgecnn time` (decoding hidden behind inference); and that the Ray engine's throughput per core
on a local cluster be within 25% of the local engine's.

    .venv/bin/python lab/batch_throughput.py                       # the issue's table (minutes)
    .venv/bin/python lab/batch_throughput.py --face 200 --resnet 16 --configs 1x1,2x1u --no-ray   # smoke

For each model (the bundled face classifier, zoo resnet50; both converted once to .ecnn so that the
workers memory-map one file) it writes its test images into --workdir (random crops of the bundled
samples and scene, JPEG, at sizes around the model's input: decoding and resizing are real work),
then measures, in this order:

- one core, one process: a child bound to the first core runs the batch Runner over every image in
  turn (decode, pre-process, infer in batches of --batch-size), timed from the second batch, and
  the model alone on one prepared batch (CPU time per item: what decoding leaves to inference);
- pure inference: for W workers of T threads, W concurrent `edgecnn time MODEL --json --threads T
  --batch B` children, each bound to its own core group (taskset), summed as B x 1000 / median ms:
  what the cores give when nothing but inference runs on them;
- `edgecnn.batch.run` with each --configs WxT (workers x intra-op threads; WxTu: workers not bound
  to cores, `--no-bind`), into a fresh folder:
  steady items/s from the row that completes the first 10% of the items to the end (start-up left
  out, as in `edgecnn time`'s warm-up), and the wall time with start-up; the resident memory of each worker sampled
  mid-job from /proc/PID/smaps_rollup (RSS, private = what this worker alone holds, shared); and
  the CPU time per item of the workers (Ray: its map actors) and the coordinator over the same
  rows, which a shared machine distorts far less than items/s;
- after every local run (Ray's driver threads and daemons would take CPU from them), the Ray engine
  on a local cluster (ray.init with the machine's cores), the same jobs, one actor per worker
  (unless --no-ray).

It prints one markdown table per model with the command, the machine line, the date and the load.
Run it on a quiet machine: on a shared one every ratio mostly measures the neighbours.

    .venv/bin/python lab/batch_throughput.py --stages              # where a worker's CPU goes

--stages measures instead, in a child bound to one core, the CPU time per item of each stage an
item goes through (thread time around each, over every image, --rounds times, medians): the file
check, Pillow's open (header) and decode, the resize, the 8-bit array, the normalisation, the
batch's model run and the rest of ``Runner.infer`` (padding, softmax, top-k, rows), the rows'
pickling both ways (worker to coordinator) and the coordinator's Parquet shard commit. Their sum
bounds what any scheduling can reach when the same cores decode and infer:
items/s <= cores x 1000 / total ms, against `edgecnn time`'s cores x 1000 / model ms.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from common import machine_line

MODELS = ("face", "resnet50")


@dataclass
class Measured:
    label: str
    items_per_s: float
    cpu_ms: float  # CPU time of the workers and the coordinator per item, in the steady state
    wall_s: float | None = None
    memory: str = ""


class CpuMeter:
    """CPU seconds used by this process and the job's workers (batch workers or Ray's map actors),
    less what the meter itself spends."""

    RESCAN_S = 2.0  # Ray's actors are found by a walk over /proc, redone this often

    def __init__(self, engine: str) -> None:
        import psutil

        self.psutil = psutil
        self.engine = engine
        self.seen: dict[int, float] = {}
        self.start: dict[int, float] | None = None
        self.start_self = time.process_time()
        self.overhead = 0.0
        self.actors: list[Any] = []
        self.scanned = 0.0

    def _workers(self) -> list[Any]:
        import multiprocessing

        if self.engine == "local":
            return [
                self.psutil.Process(c.pid)
                for c in multiprocessing.active_children()
                if c.name.startswith("edgecnn-batch-") and c.pid
            ]
        if time.monotonic() - self.scanned > self.RESCAN_S:
            self.actors = [
                p for p in self.psutil.Process().children(recursive=True) if "MapWorker" in self._title(p)
            ]
            self.scanned = time.monotonic()
        return self.actors

    def _title(self, process: Any) -> str:
        try:
            return " ".join(process.cmdline())
        except self.psutil.Error:
            return ""

    def sample(self) -> None:
        """The first call starts the count; a worker first seen later counts from then."""
        began = time.process_time()
        if self.start is None:
            self.start, self.start_self = {}, began
        for process in self._workers():
            try:
                times = process.cpu_times()
            except self.psutil.Error:
                continue
            self.seen[process.pid] = times.user + times.system
            self.start.setdefault(process.pid, self.seen[process.pid])
        self.overhead += time.process_time() - began

    def used(self) -> float:
        start = self.start or {}
        workers = sum(t - start.get(pid, 0.0) for pid, t in self.seen.items())
        return workers + time.process_time() - self.start_self - self.overhead


def parse_configs(text: str) -> list[tuple[int, int, bool]]:
    """'2x1,2x1u' -> [(2, 1, True), (2, 1, False)]: workers x threads, a trailing u for unbound workers."""
    configs = []
    for part in text.split(","):
        workers, _, threads = part.partition("x")
        configs.append((int(workers), int(threads.rstrip("u") or 1), not threads.endswith("u")))
    return configs


def write_images(folder: Path, count: int, side: int, seed: int) -> Path:
    """``count`` JPEG crops of the bundled pictures, about 1.2x ``side`` on their longer edge."""
    from PIL import Image

    from edgecnn.vision.faces import bundled_path

    if folder.is_dir() and len(list(folder.glob("*.jpg"))) == count:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    sources = [
        Image.open(bundled_path(name)).convert("RGB")
        for name in ("simplecnn/samples/face.jpg", "simplecnn/samples/bg.jpg", "vision/scene.jpg")
    ]
    rng = np.random.default_rng(seed)
    for i in range(count):
        image = sources[i % len(sources)]
        w, h = image.size
        cw, ch = int(rng.integers(w // 2, w + 1)), int(rng.integers(h // 2, h + 1))
        x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        crop = image.crop((x0, y0, x0 + cw, y0 + ch))
        scale = 1.2 * side / max(crop.size)
        crop = crop.resize((max(1, round(crop.width * scale)), max(1, round(crop.height * scale))))
        crop.save(folder / f"img{i:05d}.jpg", quality=90)
    return folder


def model_and_task(name: str, workdir: Path) -> tuple[Path, Any, int]:
    """The model as .ecnn in ``workdir``, its TaskSpec, and its input side."""
    import edgecnn
    from edgecnn.batch import TaskSpec
    from edgecnn.bench.zoo import default_cache_dir, model_path
    from edgecnn.vision.faces import BUNDLED_MODEL, batched_model, bundled_path
    from edgecnn.vision.preprocess import Preprocess

    if name == "face":
        source, side = bundled_path(BUNDLED_MODEL), 128
        task = TaskSpec("classify", Preprocess((side, side), "bgr", 1 / 255), top=2, apply_softmax=True)
    else:
        source, side = model_path(name, default_cache_dir()), 224
        pre = Preprocess((side, side), "rgb", 1 / 255, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
        task = TaskSpec("classify", pre, top=5, apply_softmax=True)
    target = workdir / f"{name}.ecnn"
    if not target.exists():  # the batch axis left free, for `edgecnn time --batch` as for the workers
        batched_model(edgecnn.load(source, threads=1)).save(target)
    return target, task, side


def memory_of(pid: int) -> dict[str, int]:
    """RSS, private and shared resident memory of a process, in MiB (smaps_rollup)."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as file:
        for line in file:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                fields[parts[0][:-1]] = int(parts[1])
    private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    shared = fields.get("Shared_Clean", 0) + fields.get("Shared_Dirty", 0)
    return {"rss": fields.get("Rss", 0) >> 10, "private": private >> 10, "shared": shared >> 10}


def baseline_child(model: str, folder: str, task_json: str, batch_size: int) -> None:
    """(Child) the Runner over every image in one process on one core, then the model alone on one
    prepared batch; prints items/s and the CPU milliseconds per item of both as JSON."""
    import edgecnn
    from edgecnn.batch.items import list_items
    from edgecnn.batch.tasks import Runner

    task = task_from_json(task_json)
    runner = Runner(edgecnn.load(model, threads=1), task, batch_size)
    items = list_items([folder])
    batches = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
    first = [runner.prepare(i) for i in batches[0]]
    runner.infer(first)  # plans built, kernels loaded
    started, cpu = time.perf_counter(), time.process_time()
    for batch in batches[1:]:
        runner.infer([runner.prepare(i) for i in batch])
    done = sum(len(b) for b in batches[1:])
    result = {
        "items_per_s": done / (time.perf_counter() - started),
        "cpu_ms": (time.process_time() - cpu) * 1000 / done,
    }
    x = np.stack([p.tensor for p in first])
    cpu = time.process_time()
    for _ in range(len(batches)):
        runner.net.run({runner.input_name: x})
    result["inference_cpu_ms"] = (time.process_time() - cpu) * 1000 / (len(batches) * len(first))
    print(json.dumps(result))


STAGES = (
    ("file check", "input_file_size: a regular file within the memory budget"),
    ("open", "Image.open: the file opened, the JPEG header parsed"),
    ("decode", "Image.load: the JPEG decoded"),
    ("resize", "bilinear resize to the model's input (with a mode conversion if needed)"),
    ("to array", "np.asarray: the 8-bit pixels as an array (channel order: a view)"),
    ("normalize", "Preprocess.normalize: float32, scale, mean, std, layout"),
    ("model run", "Model.run of the padded batch"),
    ("rest of infer", "Runner.infer less the model: padding, softmax, top-k, rows"),
    ("rows to coordinator", "pickle.dumps and loads of the rows message"),
    ("shard commit", "ShardWriter.commit of Parquet shards of 256 rows (fsync included)"),
)


def stages_child(model: str, folder: str, task_json: str, batch_size: int, rounds: int) -> None:
    """(Child, bound to one core) the CPU milliseconds per item of each of STAGES, medians over
    ``rounds`` passes over every image; prints them as JSON with Runner.prepare's own total."""
    from PIL import Image

    import edgecnn
    from edgecnn.batch.items import list_items
    from edgecnn.batch.shards import ShardWriter
    from edgecnn.batch.tasks import Runner, columns
    from edgecnn.vision.preprocess import input_file_size, open_image

    task = task_from_json(task_json)
    pre = task.preprocess
    runner = Runner(edgecnn.load(model, threads=1), task, batch_size)
    items = list_items([folder])
    count = len(items) - len(items) % batch_size
    items = items[:count]
    mode = "L" if pre.grayscale else "RGB"
    assert pre.size is not None
    size = (pre.size[1], pre.size[0])
    runner.infer([runner.prepare(i) for i in items[:batch_size]])  # the plan built
    passes: list[dict[str, float]] = []
    spent: dict[str, float] = {}

    def lap(stage: str, since: float) -> float:
        now = time.thread_time()
        spent[stage] = spent.get(stage, 0.0) + now - since
        return now

    with tempfile.TemporaryDirectory(prefix="batch-stages-") as out:
        writer = ShardWriter(Path(out), columns(task, runner.net), "parquet")
        for _ in range(rounds):
            spent.clear()
            rows: list[dict[str, Any]] = []
            for start in range(0, count, batch_size):
                prepared = []
                for item in items[start : start + batch_size]:
                    t = time.thread_time()
                    input_file_size(item.path, runner.budget)
                    t = lap("file check", t)
                    with open_image(item.path) as image:
                        t = lap("open", t)
                        image.load()
                        t = lap("decode", t)
                        img = image if image.mode == mode else image.convert(mode)
                        img = img if img.size == size else img.resize(size, Image.Resampling.BILINEAR)
                        t = lap("resize", t)
                        pixels = np.asarray(img)
                        pixels = pixels[:, :, None] if pixels.ndim == 2 else pixels
                        pixels = pixels[:, :, ::-1] if pre.channel_order == "bgr" else pixels
                        t = lap("to array", t)
                        pre.normalize(pixels)
                        lap("normalize", t)
                    t = time.thread_time()
                    prepared.append(runner.prepare(item))
                    lap("Runner.prepare", t)
                x = np.stack([p.tensor for p in prepared])
                t = time.thread_time()
                runner.net.run({runner.input_name: x})
                t = lap("model run", t)
                batch_rows = runner.infer(prepared)
                t = lap("Runner.infer", t)
                pickle.loads(pickle.dumps(("rows", batch_rows), protocol=pickle.HIGHEST_PROTOCOL))
                t = lap("rows to coordinator", t)
                rows.extend(batch_rows)
                if len(rows) >= 256 or start + batch_size == count:
                    writer.commit(rows)
                    rows = []
                    lap("shard commit", t)
            spent["rest of infer"] = spent.pop("Runner.infer") - spent["model run"]
            passes.append({k: v * 1000 / count for k, v in spent.items()})
    print(json.dumps({k: statistics.median(p[k] for p in passes) for k in passes[0]}))


def measure_stages(name: str, args: argparse.Namespace) -> list[str]:
    """One model's stage table (see --stages)."""
    import dataclasses

    workdir = Path(args.workdir)
    model, task, side = model_and_task(name, workdir)
    count = args.face if name == "face" else args.resnet
    folder = write_images(workdir / f"{name}-images-{count}", count, side, seed=33)
    core = str(min(os.sched_getaffinity(0)))
    command = ["taskset", "-c", core, sys.executable, __file__, "--stages-child", str(model), str(folder)]
    command += [json.dumps(dataclasses.asdict(task)), str(args.batch_size), str(args.rounds)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=child_env(1))
    ms = json.loads(done.stdout.strip().splitlines()[-1])
    total = sum(ms[stage] for stage, _ in STAGES)
    cores = len(os.sched_getaffinity(0))
    lines = [
        f"### {name}: CPU ms per item of each stage, {count} images, batch size {args.batch_size}, "
        f"median of {args.rounds} passes",
        "",
        "| stage | what | CPU ms/item | share |",
        "|---|---|---|---|",
        *(f"| {stage} | {what} | {ms[stage]:.3f} | {ms[stage] / total:.0%} |" for stage, what in STAGES),
        f"| **total** | | **{total:.3f}** | |",
        f"| (Runner.prepare, timed whole) | the first six stages in one call | {ms['Runner.prepare']:.3f} | |",
        "",
        f"Ceiling with {cores} cores doing every stage: {cores * 1000 / total:.0f} items/s; pure inference "
        f"(the model run alone): {cores * 1000 / ms['model run']:.0f} items/s; ratio "
        f"{ms['model run'] / total:.2f}.",
    ]
    print("\n".join(lines), file=sys.stderr, flush=True)
    return lines


def task_from_json(text: str) -> Any:
    from edgecnn.batch import TaskSpec
    from edgecnn.vision.preprocess import Preprocess

    fields = json.loads(text)
    pre = fields.pop("preprocess")
    for key in ("size", "mean", "std"):
        pre[key] = tuple(pre[key]) if pre[key] is not None else None
    fields["labels"] = tuple(fields["labels"])
    return TaskSpec(preprocess=Preprocess(**pre), **fields)


def one_core(model: Path, folder: Path, task: Any, batch_size: int) -> dict[str, float]:
    import dataclasses

    task_json = json.dumps(dataclasses.asdict(task))
    core = str(min(os.sched_getaffinity(0)))
    command = ["taskset", "-c", core, sys.executable, __file__, "--baseline-child", str(model), str(folder)]
    command += [task_json, str(batch_size)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=child_env(1))
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_env(threads: int) -> dict[str, str]:
    return {**os.environ, "EDGECNN_NUM_THREADS": str(threads)}


def pure_inference(model: Path, workers: int, threads: int, batch_size: int, iterations: int) -> float:
    """Summed items/s of ``workers`` concurrent `edgecnn time` runs, each on its own cores."""
    from edgecnn.batch.job import core_groups, usable_cores

    groups = core_groups(usable_cores(), workers, threads)
    children = [
        subprocess.Popen(
            [
                *("taskset", "-c", ",".join(map(str, group)), sys.executable, "-m", "edgecnn", "time"),
                *(str(model), "--json", "--threads", str(threads), "--batch", str(batch_size)),
                *("--iterations", str(iterations), "--warmup", "3"),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(threads),
        )
        for group in groups
    ]
    total = 0.0
    for child in children:
        out, _ = child.communicate()
        total += batch_size * 1000.0 / float(json.loads(out)["median_ms"])
    return total


def batch_run(
    model: Path,
    folder: Path,
    task: Any,
    workers: int,
    threads: int,
    batch_size: int,
    engine: str,
    bind: bool = True,
    total: int = 0,
) -> Measured:
    import multiprocessing

    from edgecnn.batch import BatchJob, run

    rows: list[tuple[float, int]] = []  # (time, count) from the first 10% of the items on
    done = [0]
    samples: list[dict[str, int]] = []
    meter = CpuMeter(engine)

    def on_rows(count: int) -> None:
        done[0] += count
        if done[0] >= total // 10:  # steady state: every worker has started by then
            rows.append((time.perf_counter(), count))
            meter.sample()
        if not samples and done[0] >= 4 * batch_size * workers and engine == "local":
            for child in multiprocessing.active_children():
                if child.name.startswith("edgecnn-batch-") and child.pid:
                    samples.append(memory_of(child.pid))

    with tempfile.TemporaryDirectory(prefix="batch-out-") as out:
        job = BatchJob(
            str(model), out, task, workers=workers, threads=threads, batch_size=batch_size, bind=bind
        )
        started = time.perf_counter()
        summary = run(job, [folder], engine=engine, on_rows=on_rows)
        wall = time.perf_counter() - started
    assert summary.failed == 0, f"{summary.failed} item(s) failed"
    after_first = sum(c for _, c in rows[1:])
    steady = after_first / (rows[-1][0] - rows[0][0]) if len(rows) > 1 else 0.0
    memory = ""
    if samples:
        memory = "; ".join(f"{s['rss']}/{s['private']}/{s['shared']}" for s in samples)
    label = f"{'ray' if engine == 'ray' else 'batch'} {workers} x {threads}{'' if bind else ' unbound'}"
    return Measured(label, steady, meter.used() * 1000 / max(after_first, 1), wall, memory)


@dataclass
class Setup:
    """One model's inputs and reference numbers, shared by the local and the Ray pass."""

    name: str
    model: Path
    task: Any
    folder: Path
    count: int
    base: float
    pure: dict[tuple[int, int], float]
    lines: list[str]


def measure_model(name: str, args: argparse.Namespace) -> Setup:
    """The references (one core, `edgecnn time`) and the local engine's rows of one model's table."""
    workdir = Path(args.workdir)
    model, task, side = model_and_task(name, workdir)
    count = args.face if name == "face" else args.resnet
    folder = write_images(workdir / f"{name}-images-{count}", count, side, seed=33)
    one = one_core(model, folder, task, args.batch_size)
    base = one["items_per_s"]
    setup = Setup(name, model, task, folder, count, base, {}, [
        f"### {name}: {count} images, batch size {args.batch_size}",
        "",
        "| run | items/s | x one core | / pure inference | CPU ms/item | wall s (with start-up) "
        "| worker MiB rss/private/shared |",
        "|---|---|---|---|---|---|---|",
        f"| one process, one core (Runner loop) | {base:.1f} | 1.00 | | {one['cpu_ms']:.2f} | | |",
        f"| the model alone, one core (CPU) | | | | {one['inference_cpu_ms']:.2f} | | |",
    ])  # fmt: skip
    iterations = max(10, min(200, count // args.batch_size))
    for workers, threads, bind in parse_configs(args.configs):
        if (workers, threads) not in setup.pure:
            setup.pure[workers, threads] = pure = pure_inference(
                model, workers, threads, args.batch_size, iterations
            )
            setup.lines.append(
                f"| `edgecnn time` x {workers} (threads {threads}) | {pure:.1f} | {pure / base:.2f} | 1.00 "
                "| | | |"
            )
        add_run(setup, args, workers, threads, "local", bind)
    return setup


def add_run(
    setup: Setup, args: argparse.Namespace, workers: int, threads: int, engine: str, bind: bool
) -> None:
    got = batch_run(
        setup.model, setup.folder, setup.task, workers, threads, args.batch_size, engine, bind, setup.count
    )
    pure = setup.pure[workers, threads]
    setup.lines.append(
        f"| {got.label} | {got.items_per_s:.1f} | {got.items_per_s / setup.base:.2f} | "
        f"{got.items_per_s / pure:.2f} | {got.cpu_ms:.2f} | {got.wall_s:.1f} | {got.memory} |"
    )
    print(setup.lines[-1], file=sys.stderr, flush=True)


def start_ray() -> None:
    """A local Ray cluster on this machine's cores (after the local runs: its driver threads, raylet
    and object store would take CPU from them)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(
        num_cpus=len(os.sched_getaffinity(0)),
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--baseline-child":
        baseline_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--stages-child":
        stages_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--face", type=int, default=2000, help="images for the face classifier")
    parser.add_argument("--resnet", type=int, default=200, help="images for ResNet-50")
    parser.add_argument(
        "--configs",
        default="1x1,2x1,2x1u,1x2",
        help="workers x threads, comma-separated; a trailing u: unbound",
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--models", default=",".join(MODELS), help=f"some of {', '.join(MODELS)}")
    parser.add_argument("--no-ray", action="store_true", help="leave the Ray engine out")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "edgecnn-batch-lab"))
    parser.add_argument("--stages", action="store_true", help="the CPU time of each stage instead")
    parser.add_argument("--rounds", type=int, default=5, help="passes over the images (--stages)")
    args = parser.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    print(f"`.venv/bin/python lab/{Path(__file__).name} {shlex.join(sys.argv[1:])}`")
    print(f"{machine_line()}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    if args.stages:
        for name in args.models.split(","):
            print("\n".join(measure_stages(name, args)) + "\n", flush=True)
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    setups = [measure_model(name, args) for name in args.models.split(",")]
    if not args.no_ray:
        start_ray()
        for setup in setups:
            for workers, threads, bind in parse_configs(args.configs):
                if bind:
                    add_run(setup, args, workers, threads, "ray", bind)
    for setup in setups:
        print("\n".join(setup.lines) + "\n", flush=True)
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
