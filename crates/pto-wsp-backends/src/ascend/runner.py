

# ---- the runner (the same for every emitted tree) -------------------------------------------
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = "tensormap_and_ringbuffer"

# The runtime's watchdog stops a run when no task completes for a wall-clock budget (simpler's
# SIMPLER_SCHEDULER_TIMEOUT_MS; 10 s on a2a3sim). The simulator runs each of the device's 72
# AICores as a host thread: when the host has fewer CPUs, kernels running at once share them,
# and a kernel's wall time grows with the cores running beside it (16 MoE experts of 0.3 s CPU
# each, started together on 2 CPUs, all finish after several seconds). A budget per CPU's share
# of the cores keeps a slow kernel from passing for a hang; a real hang is still reported.
SIM_CORES = 72
SIM_WATCHDOG_MS_PER_SHARE = 5000


def host_cpus():
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def sim_watchdog_ms(cpus):
    """The watchdog budget (ms) on a host of `cpus` CPUs: 5 s times the simulated cores per CPU."""
    cpus = max(1, cpus or 1)
    return SIM_WATCHDOG_MS_PER_SHARE * max(1, -(-SIM_CORES // cpus))


def load_inputs(in_dir):
    """Every module tensor: IN_DIR/NAME.npy when present (dtype and shape checked), else zeros."""
    host = []
    for t in TENSORS:
        dtype = np.dtype(t["numpy"])
        path = os.path.join(in_dir, t["name"] + ".npy")
        if os.path.exists(path):
            a = np.load(path)
            if a.dtype != dtype or tuple(a.shape) != tuple(t["shape"]):
                sys.exit(
                    f"error: {path}: tensor `{t['name']}` is {dtype}{list(t['shape'])}, "
                    f"the file holds {a.dtype}{list(a.shape)}"
                )
            a = np.ascontiguousarray(a)
        else:
            a = np.zeros(t["shape"], dtype=dtype)
        host.append(a)
    return host


def build(platform, pto_isa_root, build_dir):
    """Compiles every kernel and the orchestration with simpler's compiler; returns the callable."""
    from simpler.task_interface import ArgDirection, ChipCallable, CoreCallable  # noqa: PLC0415
    from simpler_setup.kernel_compiler import KernelCompiler  # noqa: PLC0415

    kc = KernelCompiler(platform=platform)
    include = kc.get_orchestration_include_dirs(RUNTIME) + [HERE]
    os.makedirs(build_dir, exist_ok=True)
    children = []
    for k in KERNELS:
        binary = kc.compile_incore(
            os.path.join(HERE, k["file"]),
            core_type=k["core"],
            pto_isa_root=pto_isa_root,
            extra_include_dirs=include,
            build_dir=build_dir,
        )
        if not platform.endswith("sim"):
            from simpler_setup.elf_parser import extract_text_section  # noqa: PLC0415

            binary = extract_text_section(binary)
        signature = [getattr(ArgDirection, d) for d in k["signature"]]
        children.append((k["func_id"], CoreCallable.build(signature=signature, binary=binary)))
    orch = kc.compile_orchestration(
        RUNTIME, os.path.join(HERE, "orchestration.cpp"), extra_include_dirs=[HERE], build_dir=build_dir
    )
    signature = [ArgDirection.INOUT if t["written"] else ArgDirection.IN for t in TENSORS]
    return ChipCallable.build(
        signature=signature,
        func_name="aicpu_orchestration_entry",
        binary=orch,
        children=children,
        config_name="aicpu_orchestration_config",
    )


def run(platform, chip, host, deps_dir):
    """Runs the workload once on a level-2 worker; returns the host arrays after the run and the
    status of every kernel task (one row per task: the failed check's number, its values)."""
    from simpler.task_interface import CallConfig, DataType, TaskArgs, TensorArgType  # noqa: PLC0415
    from simpler.worker import Worker  # noqa: PLC0415

    worker = Worker(level=2, platform=platform, runtime=RUNTIME, device_id=0)
    handle = worker.register(chip)
    worker.init()
    try:
        bufs = []
        args = TaskArgs()
        for t, a in zip(TENSORS, host):
            buf = worker.malloc(max(a.nbytes, 1))
            worker.copy_to(buf, a)
            bufs.append(buf)
            tag = TensorArgType.INOUT if t["written"] else TensorArgType.INPUT
            args.add_tensor(buf.tensor(tuple(t["shape"]), getattr(DataType, t["simpler"])), tag)
        status = np.zeros((STATUS_SLOTS, 8), dtype=np.int64)
        status_buf = worker.malloc(status.nbytes)
        worker.copy_to(status_buf, status)
        bufs.append(status_buf)
        args.add_tensor(status_buf.tensor((STATUS_SLOTS, 8), DataType.INT64), TensorArgType.INOUT)
        config = CallConfig()
        if RING_TASK_WINDOW:
            config.runtime_env.ring_task_window = RING_TASK_WINDOW
        if deps_dir:
            os.makedirs(deps_dir, exist_ok=True)
            config.enable_dep_gen = True
            config.output_prefix = deps_dir
        worker.run(handle, args, config)
        out = []
        for t, a, buf in zip(TENSORS, host, bufs):
            if t["written"]:
                b = np.empty_like(a)
                worker.copy_from(b, buf)
                out.append(b)
            else:
                out.append(a)
        worker.copy_from(status, status_buf)
        for buf in bufs:
            worker.free(buf)
        return out, status
    finally:
        worker.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("in_dir", help="directory of NAME.npy inputs (missing tensors start zeroed)")
    ap.add_argument("out_dir", help="directory for NAME.npy of every tensor the workload writes")
    ap.add_argument("--platform", default=PLATFORM, choices=["a2a3sim", "a2a3"])
    ap.add_argument(
        "--pto-isa-root",
        default=os.environ.get("PTO_ISA_ROOT", os.path.expanduser("~/.cache/pto-wsp/pto-isa")),
    )
    ap.add_argument("--build-dir", default=os.path.join(HERE, "build"))
    ap.add_argument("--deps-dir", default=None, help="also write the runtime's dependency graph (deps.json) here")
    a = ap.parse_args()
    if a.platform.endswith("sim") and "SIMPLER_SCHEDULER_TIMEOUT_MS" not in os.environ:
        # Read by the simulator when it loads, so set before any of simpler is imported.
        os.environ["SIMPLER_SCHEDULER_TIMEOUT_MS"] = str(sim_watchdog_ms(host_cpus()))
    host = load_inputs(a.in_dir)
    chip = build(a.platform, a.pto_isa_root, a.build_dir)
    out, status = run(a.platform, chip, host, a.deps_dir)
    failures = [row for row in status if row[0] != 0]
    for row in failures[:10]:
        code = int(row[0])
        text = MESSAGES[code - 1] if 1 <= code <= len(MESSAGES) else f"kernel check {code} failed"
        print("error: " + text.format(*[int(v) for v in row[1:8]]), file=sys.stderr)
    if failures:
        sys.exit(f"error: {len(failures)} kernel task(s) failed a check; no outputs written")
    os.makedirs(a.out_dir, exist_ok=True)
    for t, arr in zip(TENSORS, out):
        if t["written"]:
            np.save(os.path.join(a.out_dir, t["name"] + ".npy"), arr)
    kernel_tasks, barrier_tasks, source = KERNEL_TASKS, BARRIER_TASKS, "orchestration table"
    if a.deps_dir:
        # The runtime's own record: tasks in submission order, edges by their source.
        with open(os.path.join(a.deps_dir, "deps.json")) as f:
            deps = json.load(f)
        pos = {t["task_id"]: i for i, t in enumerate(deps["tasks"])}
        kernel_tasks = sum(1 for t in deps["tasks"] if any(k >= 0 for k in t["kernel_ids"]))
        barrier_tasks = len(deps["tasks"]) - kernel_tasks
        source = "runtime deps.json"
        first = {k["func_id"]: k["first_part"] for k in KERNELS}

        def kind(t):
            ids = [k for k in t["kernel_ids"] if k >= 0]
            if not ids:
                return "b"
            return "k" if first.get(ids[0], True) else "p"

        with open(os.path.join(a.deps_dir, "kinds.txt"), "w") as f:
            f.write("".join(kind(t) for t in deps["tasks"]))
        with open(os.path.join(a.deps_dir, "edges.txt"), "w") as f:
            for e in deps["edges"]:
                f.write(f"{pos[e['pred']]} {pos[e['succ']]} {e['source']}\n")
    with open(os.path.join(a.out_dir, "tasks.txt"), "w") as f:
        f.write(f"kernel_tasks {kernel_tasks}\nbarrier_tasks {barrier_tasks}\n")
    print(f"ran {kernel_tasks} kernel task(s) and {barrier_tasks} barrier task(s) on {a.platform} ({source})")


if __name__ == "__main__":
    main()
