"""End-to-end fidelity of the step-time model (issue 32): every row of
tests/data/e2e_training.csv (published training runs: NVIDIA's DGX Cloud recipes on DGX H100
in BF16 and FP8, the Megatron-LM README tables, ResNet-50 on DGX A100) predicted through the CLI
(`toposched scale`, first-fit on an empty cluster of the row's hardware), from the row's
plan and settings and the model's published architecture (tests/data/e2e_training/
models.json) only: no value is keyed by row. Prints the table (docs/cost-model.md shows it)
and asserts the accuracy the model reaches:
  - step-time rows: median |error| and the largest, each within the bound below;
  - weak-scaling rows: the error of the efficiency (absolute);
  - ResNet-50: the single-GPU step;
  - FP8 rows: each row.
What the issue asks and the model does not reach is stated in docs/cost-model.md
("Fidelity against published runs"); the bounds here are what it does reach, so a change
that makes any row worse fails."""
import csv
import json
import os
import re
import statistics
import tempfile
import unittest

from toposched_cli import SOURCE_DIR, run

DATA = os.path.join(SOURCE_DIR, "tests", "data")
ROWS = os.path.join(DATA, "e2e_training.csv")
MODELS = os.path.join(DATA, "e2e_training", "models.json")

# What the model reaches on these rows (docs/cost-model.md, "Fidelity against published
# runs"), each bound today's figure with a little room, so a change that makes any of it worse
# fails. The targets are 10% median / 25% every row / 0.02: the median is met (6.9%),
# and so are the weak-scaling rows (DP and TP 1 -> 8, worst 0.010) and the FP8 rows (worst
# 6.2%); one row misses 25% (GPT 1.7B -30.5%; what was tried is in docs/cost-model.md). GPT
# 32B (+39.9% with the CSV's assumed MBS 1) is +2.3% with the model's default micro-batch
# rule, which the Megatron-LM rows now use; ResNet-50 on 8 GPUs (-26.4% when the vision rule
# scaled its memory-bound work with FLOP/s) is -23.6%.
STEP_MEDIAN_BOUND = 0.08
STEP_WORST_BOUND = 0.31
# Weak scaling where only DP grows (the DGX Cloud recipes, Grok-1: +0.003, -0.002, +0.001,
# +0.010) and the 2020 table's TP 1 -> 8 inside one node (+0.001): within the 0.02.
WEAK_SCALING_BOUND = 0.015
# ResNet-50 on 1 -> 8 GPUs of one node, which the model misses (+0.136: input pipeline and
# whatever else eight busy GPUs of one host lose is not modelled), held where it is.
IN_NODE_SCALING_BOUND = 0.14
# The FP8 rows (the recipes' FP8 tables): the issue's 25%; they reach 1.3-6.2%.
FP8_BOUND = 0.07
# ResNet-50 on one GPU: the 25%; it reaches -11.3%.
RESNET_SINGLE_GPU_BOUND = 0.12


def architecture(model_column):
    with open(MODELS, encoding="utf-8") as f:
        models = json.load(f)["models"]
    for m in models:
        if m["match"] in model_column:
            return m
    raise AssertionError(f"no architecture in models.json matches '{model_column}'")


def settings(notes):
    """MBS, VP and micro-batches per replica from a row's notes (defaults 1). A micro-batch
    size the source does not publish ("MBS 1 assumed": the Megatron-LM README's model table
    gives the batch and DP, not the split) is not passed: the job gives the sequences per
    replica (`replica_batch`) and the model's default rule chooses the micro-batch size
    (docs/cost-model.md, "Default micro-batch size")."""
    def grab(pattern, default):
        m = re.search(pattern, notes)
        return int(m.group(1)) if m else default
    out = {
        "micro_batch": grab(r"MBS (\d+)", 1),
        "virtual_stages": grab(r"(?:VP |V=)(\d+)", 1),
        "micro_batches": grab(r"(\d+) micro-batches per replica", 1),
    }
    if re.search(r"MBS \d+ assumed", notes):
        out["replica_batch"] = out.pop("micro_batch") * out.pop("micro_batches")
    return out


def first(value):
    """'4->64' -> (4, 64); '8' -> (8, 8); '1 (ep 8)' -> (1, 1)."""
    parts = re.findall(r"\d+", value.split("(")[0])
    return int(parts[0]), int(parts[-1])


class Predictor:
    def __init__(self, tmp):
        self.tmp = tmp
        self.count = 0
        self.clusters = {}
        self.points = []  # every scale point predicted, in order (the last is a row's own)
        # A weak-scaling row's settings are its step-time rows' (same model, notes left empty).
        self.notes = {}
        with open(ROWS, encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row["notes"] and re.search(r"micro-batches|MBS", row["notes"]):
                    self.notes.setdefault(row["model"], row["notes"])

    def cluster(self, hardware, gpus):
        """A preset of the row's hardware with enough nodes (A100 40GB as a spec file)."""
        nodes = max(1, (gpus + 7) // 8)
        if "A100" in hardware:
            spec = f"preset:dgx-a100?nodes={max(nodes, 2)}"
            if "40GB" in hardware:
                key = ("a100-40", nodes)
                if key not in self.clusters:
                    text = run("show", "--cluster", spec, "--spec").stdout
                    path = os.path.join(self.tmp, f"dgx-a100-40gb-{nodes}.yaml")
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(text.replace("A100-SXM4", "A100-SXM4-40GB"))
                    self.clusters[key] = path
                return self.clusters[key]
            return spec
        return f"preset:dgx-h100?nodes={max(nodes, 2)}"

    def job(self, row, model_column, tp, pp, dp, ep, cp):
        arch = architecture(model_column)
        model = dict(arch["model"])
        if arch.get("workload") != "dp-vision":
            model.update(arch.get("settings") or settings(self.notes.get(model_column) or row["notes"]))
            if re.match(r"FP8\b", row["notes"]):  # the recipes' FP8 tables (Transformer Engine)
                model["precision"] = "fp8"
            batch = re.search(r"batch (\d+)", row["metric"])
            if batch:  # "one replica, batch 16": one micro-batch of that many sequences
                model["micro_batch"] = int(batch.group(1))
        body = {"name": model_column, "plan": {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp}, "model": model}
        if "workload" in arch:
            body["workload"] = arch["workload"]
        self.count += 1
        path = os.path.join(self.tmp, f"job{self.count}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(body, f)
        return path

    def steps(self, row, model_column, tp, pp, dp_sizes, gpus_sizes):
        """Step times (s) of the plan at each (dp, gpus): cp and ep from the GPU count."""
        ep = 8 if "(ep 8)" in row["dp"] else 1
        out = []
        for dp, gpus in zip(dp_sizes, gpus_sizes):
            cp = gpus // (tp * pp * dp * ep)
            job = self.job(row, model_column, tp, pp, dp, ep, cp)
            result = json.loads(run("scale", "--cluster", self.cluster(row["hardware"], gpus), "--job", job,
                                    "--gpus", str(gpus), "--policies", "first-fit", "--format", "json").stdout)
            point = result["policies"]["first-fit"][0]
            assert point["placed"], point
            out.append(point["step_time_s"])
            self.points.append(point)
        return out


def predict(pred, row):
    """(kind, measured, predicted) for one row."""
    metric, measured = row["metric"], float(row["measured"])
    tp0, tp1 = first(row["tp"])
    pp = first(row["pp"])[0]
    dp0, dp1 = first(row["dp"])
    g0, g1 = first(row["gpus"])
    model = row["model"]
    if metric.startswith("weak_scaling_efficiency, TP"):
        # GPT-2 1B on TP 1 against 8B on TP 8 (one node each), as in their one-replica rows.
        row = dict(row, metric=row["metric"] + " batch 16")
        small = pred.steps(row, "GPT-2 1B", tp0, pp, [1], [g0])[0]
        large = pred.steps(row, "GPT-2 8B", tp1, pp, [1], [g1])[0]
        return "weak", measured, small / large
    if metric.startswith("weak_scaling") or metric.startswith("scaling efficiency"):
        small, large = pred.steps(row, model, tp0, pp, [dp0, dp1], [g0, g1])
        return "weak", measured, small / large
    if metric.startswith("added step time"):
        # The step at DP = 128 over the one-replica step, with the per-replica batch (16) of
        # the 2020 table's one-replica rows.
        row = dict(row, metric=row["metric"] + " batch 16")
        small, large = pred.steps(row, model, tp0, pp, [1, dp1], [g0, g1])
        return "added", measured, large - small
    return "step", measured, pred.steps(row, model, tp0, pp, [dp0], [g0])[0]


def predict_all():
    """Every row of e2e_training.csv: (row, kind, measured, predicted, the row's own scale point)."""
    out = []
    with open(ROWS, encoding="utf-8") as f, tempfile.TemporaryDirectory(prefix="toposched-fidelity-") as tmp:
        pred = Predictor(tmp)
        for row in csv.DictReader(f):
            kind, measured, predicted = predict(pred, row)
            out.append((row, kind, measured, predicted, pred.points[-1]))
    return out


def table(rows):
    """The Markdown table docs/cost-model.md and docs/results.md show, and its summary line."""
    lines = ["| model | tp/pp/dp (GPUs) | precision | MBS x micro-batches | metric | measured | predicted | error | compute |"
             " bubble | straggler | exposed comm (tp/cp/ep/dp/pp) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row, kind, measured, predicted, point in rows:
        err = predicted - measured if kind == "weak" else predicted / measured - 1
        shown = f"{err:+.3f}" if kind == "weak" else f"{100 * err:+.1f}%"
        terms = "| | | |"
        if kind == "step":
            by_kind = point.get("exposed_comm_by_kind_s", {})
            exposed = "/".join(f"{by_kind[k]:.2f}" if k in by_kind else "–" for k in ("tp", "cp", "ep", "dp", "pp"))
            own = point["compute_s"] - point["bubble_s"] - point["straggler_s"]
            terms = f"| {own:.3f} | {point['bubble_s']:.3f} | {point['straggler_s']:.3f} | {exposed}"
        metric = {"step": "step (s)", "weak": "efficiency", "added": "added step (s)"}[kind]
        precision = "FP8" if row["notes"].startswith("FP8") else ""
        split = f"{point['micro_batch']} x {point['micro_batches']}" if kind == "step" and "micro_batch" in point else ""
        lines.append(f"| {row['model']} | {row['tp']}/{row['pp']}/{row['dp']} ({row['gpus']}) | {precision} | {split} | {metric} | "
                     f"{measured:.4g} | {predicted:.4g} | {shown} {terms} |")
    errors = [(abs(p / m - 1), row["model"]) for row, kind, m, p, _ in rows if kind == "step"]
    worst = max(errors)
    lines.append("")
    lines.append(f"Step-time rows: {len(errors)}, median |error| {100 * statistics.median([e for e, _ in errors]):.1f}%, "
                 f"worst {100 * worst[0]:.1f}% ({worst[1]}).")
    return "\n".join(lines)


class Fidelity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rows = predict_all()
        print("\n" + table(cls.rows))

    def step_errors(self):
        return [abs(p / m - 1) for _, kind, m, p, _ in self.rows if kind == "step"]

    def test_every_row_predicted(self):
        self.assertEqual(len(self.rows), 32)
        for row, _, _, predicted, _ in self.rows:
            self.assertGreater(predicted, 0, row["model"])

    def test_step_time_median_and_worst(self):
        errors = self.step_errors()
        print(f"\nstep-time rows: {len(errors)}, median |error| {100 * statistics.median(errors):.1f}%, "
              f"worst {100 * max(errors):.1f}%")
        self.assertLessEqual(statistics.median(errors), STEP_MEDIAN_BOUND)
        self.assertLessEqual(max(errors), STEP_WORST_BOUND)

    def test_weak_scaling(self):
        checked = 0
        for row, kind, measured, predicted, _ in self.rows:
            if kind != "weak":
                continue
            in_node = "inside one node" in row["metric"]
            with self.subTest(model=row["model"]):
                self.assertLessEqual(abs(predicted - measured), IN_NODE_SCALING_BOUND if in_node else WEAK_SCALING_BOUND)
                checked += 1
        self.assertEqual(checked, 6)

    def test_fp8_rows(self):
        """The issue's FP8 target (25%), held at what the rows reach."""
        rows = [(row, m, p) for row, kind, m, p, _ in self.rows if kind == "step" and row["notes"].startswith("FP8")]
        self.assertEqual(len(rows), 4)
        for row, measured, predicted in rows:
            with self.subTest(model=row["model"], gpus=row["gpus"]):
                self.assertLessEqual(abs(predicted / measured - 1), FP8_BOUND)

    def test_resnet50_single_gpu(self):
        rows = [(m, p) for row, kind, m, p, _ in self.rows if kind == "step" and "ResNet-50" in row["model"]]
        self.assertTrue(rows)
        measured, predicted = rows[0]
        self.assertLessEqual(abs(predicted / measured - 1), RESNET_SINGLE_GPU_BOUND)


if __name__ == "__main__":
    unittest.main()
