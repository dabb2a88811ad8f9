"""Tests of modules of plans (Plan-Descriptor-Execute, docs/PDE.md) from Python: the `.wsp`
text round trip, runs of examples/pde/decode_attention.wsp with numpy arrays against a float64
numpy attention, descriptor counts against the generator's rule counted here, and each bad
input's error at its `file:line:column`."""

import numpy as np
import pytest

import pto_wsp
from support import ROOT, assert_to_text_is_what_pto_wsp_fmt_prints

PDE_EXAMPLES = sorted((ROOT / "examples" / "pde").glob("*.wsp"))
DECODE = ROOT / "examples" / "pde" / "decode_attention.wsp"


def test_there_are_plan_examples():
    assert DECODE in PDE_EXAMPLES


@pytest.mark.parametrize("path", PDE_EXAMPLES, ids=lambda p: p.name)
def test_plan_text_is_what_pto_wsp_fmt_prints(path):
    assert_to_text_is_what_pto_wsp_fmt_prints(path)


@pytest.mark.parametrize("path", PDE_EXAMPLES, ids=lambda p: p.name)
def test_plan_text_reparses_to_the_same_text(path):
    text = pto_wsp.Module.from_file(str(path)).to_text()
    module = pto_wsp.Module.from_text(text)
    assert module.to_text() == text
    # The spaces, tiers and plans survive the trip, not only the workload parts.
    for word in ("space Chunks", "tiers ByLength", "plan chunks over Chunks", "select_tier"):
        assert word in text


def test_a_module_of_plans_lists_its_plans_and_has_no_entry():
    module = pto_wsp.Module.from_file(str(DECODE))
    assert module.plans == ["chunks", "merge_heads"]
    assert module.entry is None


def attention_reference(q, k, v):
    """softmax(q kᵀ / √d) v in float64, one query row."""
    s = k @ q / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max())
    return (p / p.sum()) @ v


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "lens, max_chunks",
    [([1024, 1024, 1024], 2), ([2500, 1, 20], 5), ([5, 200, 17], 1)],
    ids=["uniform", "one-long", "all-short"],
)
def test_decode_attention_plans_match_numpy(lens, max_chunks, threads):
    module = pto_wsp.Module.from_file(str(DECODE))
    nreq = len(lens)
    program = module.compile(
        threads=threads, bind={"nreq": nreq, "max_chunks": max_chunks, "kv_lens": lens}
    )
    assert isinstance(program, pto_wsp.PlanProgram)
    assert program.threads == threads
    cap = max_chunks * 512
    rng = np.random.default_rng(sum(lens) + threads)
    kv_lens = np.array(lens, dtype=np.int32)
    qd = rng.standard_normal((nreq, 32, 128)).astype(np.float16)
    kc = rng.standard_normal((nreq, 8, cap, 128)).astype(np.float16)
    vc = rng.standard_normal((nreq, 8, cap, 128)).astype(np.float16)
    od = np.full((nreq, 32, 128), 9.0, dtype=np.float16)
    address = od.__array_interface__["data"][0]
    stats = program.execute(kv_lens=kv_lens, Qd=qd, Kc=kc, Vc=vc, Od=od)
    assert od.__array_interface__["data"][0] == address  # written in place
    # One chunk descriptor per (request, 512-token chunk below its length, KV head); one merge
    # descriptor per (request, query head).
    chunks = sum((n + 511) // 512 for n in lens)
    assert [p["plan"] for p in stats["plans"]] == ["chunks", "merge_heads"]
    assert [p["descriptors"] for p in stats["plans"]] == [chunks * 8, nreq * 32]
    for p in stats["plans"]:
        assert len(p["per_thread"]) == threads
        assert sum(p["per_thread"]) == p["descriptors"]
    assert stats["descriptor_bytes"] > 0
    assert program.stats == stats
    f = lambda a: a.astype(np.float64)  # noqa: E731
    for r, n in enumerate(lens):
        for h in range(32):
            g = h // 4
            want = attention_reference(f(qd[r, h]), f(kc[r, g, :n]), f(vc[r, g, :n]))
            np.testing.assert_allclose(
                f(od[r, h]), want, rtol=1e-2, atol=2e-3, err_msg=f"{lens} request {r} head {h}"
            )


def test_the_generator_reads_the_kv_lens_array_given_to_execute():
    """The lengths come from the array given to `execute`, not the `bind` values: 2 + 1 chunks
    of 512 tokens (the bound lengths would give 1 + 1)."""
    module = pto_wsp.Module.from_file(str(DECODE))
    program = module.compile(threads=2, bind={"nreq": 2, "max_chunks": 2, "kv_lens": [1, 1]})
    lens = np.array([1000, 1], dtype=np.int32)
    stats = program.execute(kv_lens=lens)
    assert stats["plans"][0]["descriptors"] == (2 + 1) * 8


COPY = """symbol n: i64;
symbol cap: i64;
tensor lens: i32[n];
tensor X: f32[n, 64];
tensor W: f32[cap];
kernel copy(in x: f32[?, ?], out y: f32[?]);
space S {
    axis r from 0 to n;
    axis c from 0 to 64;
    tile(c, 16);
}
tiers T {
    tier small <= 16 workspace 16;
    tier big default workspace 32;
}
plan p over S with T {
    workspace W;
    kernel small => copy(X[r, start +: 16], W[workspace +: 16]);
    kernel big => copy(X[r, start +: 16], W[workspace +: 16]);
    generate {
        for i in r {
            load len = lens[i];
            let t = select_tier(T, len);
            for j, lo, hi in c {
                if lo >= len {
                    continue;
                }
                let ws = alloc(t, i, j);
                emit(tier = t, r = i, c = j, start = lo, end = min(hi, len), workspace = ws);
            }
        }
    }
}
"""

LENS = [10, 40, 0, 16]


def copy_program(cap, text=COPY):
    module = pto_wsp.Module.from_text(text, "copy.wsp")
    return module.compile(threads=2, bind={"n": len(LENS), "cap": cap, "lens": LENS})


def test_workspace_slots_follow_the_tiers():
    program = copy_program(256)
    x = np.random.default_rng(3).standard_normal((len(LENS), 64)).astype(np.float32)
    w = np.zeros(256, dtype=np.float32)
    stats = program.execute(lens=np.array(LENS, dtype=np.int32), X=x, W=w)
    # Rows in order, tiles of 16 below the row's length, a slot of the row's tier's size each.
    want, at = np.zeros(256, dtype=np.float32), 0
    for row, n in enumerate(LENS):
        for lo in range(0, min(n, 64), 16) if n > 0 else []:
            want[at : at + 16] = x[row, lo : lo + 16]
            at += 16 if n <= 16 else 32
    assert stats["plans"][0]["workspace_used"] == at
    np.testing.assert_array_equal(w, want)


def line_of(text, needle):
    return text[: text.index(needle)].count("\n") + 1


def test_a_workspace_overflow_is_a_run_error_at_the_alloc():
    with pytest.raises(pto_wsp.RunError) as e:
        copy_program(100).execute(lens=np.array(LENS, dtype=np.int32))
    message = str(e.value)
    assert "workspace overflow" in message and "tier `big`" in message and "space `S`" in message
    assert f"copy.wsp:{line_of(COPY, 'let ws = alloc')}:" in message


def test_a_descriptor_field_out_of_range_names_the_field_at_the_emit():
    text = COPY.replace("c = j,", "c = j + 3,")
    with pytest.raises(pto_wsp.RunError) as e:
        copy_program(256, text).execute(lens=np.array(LENS, dtype=np.int32))
    message = str(e.value)
    assert "descriptor field `c` = 4 is out of range" in message
    assert f"copy.wsp:{line_of(text, 'emit(')}:" in message


def test_a_wrong_array_shape_names_the_tensor():
    with pytest.raises(ValueError, match="`X`"):
        copy_program(256).execute(X=np.zeros((3, 64), dtype=np.float32))


@pytest.mark.parametrize(
    "option, value", [("trace", True), ("device_gen", True), ("debug_checks", True), ("target", "npu")]
)
def test_task_graph_options_are_refused_for_plans(option, value):
    module = pto_wsp.Module.from_file(str(DECODE))
    with pytest.raises(pto_wsp.CompileError, match=f"`{option}`"):
        module.compile(**{option: value})
