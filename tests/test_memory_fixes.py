"""Fix values the memory model derives from what the log printed (the rules name them, diag/memory computes them)."""
from __future__ import annotations

from diag.analyze import analyze

EXHAUSTED = """[2026-08-01 10:05:00 TP0] Decode batch, #running-req: 38, #full token: 151904, full token usage: 0.32, mamba num: 190, mamba usage: 1.00, cuda graph: True, gen throughput (token/s): 1843.55, #queue-req: 12
AssertionError: Not enough space for mamba cache, try to increase --mamba-full-memory-ratio or --max-mamba-cache-size. mid=None, self.mamba_pool.size=190, self.mamba_pool.available_size()=0, len(reqs)=1
"""


def fixes(report, option=None):
    return {(f.flag or f.env or f.external_env): f.value for f in report.findings[0].fix if option is None or f.option == option}


def test_mamba_rebalance_from_pool_usage(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(EXHAUSTED)
    report = analyze([str(log)])
    assert report.findings[0].category == "oom.mamba_state"
    # KV share 1/1.9 x (0.32/0.8) = 0.21 -> ratio (1-0.21)/0.21 = 3.8; Mamba 0.79/0.474 = 1.67x the 190 slots
    assert fixes(report, 1) == {"--mamba-full-memory-ratio": "3.8"}
    # 190 slots held by 38 requests = 5 a request; 190/5 x 0.75 = 28
    assert fixes(report, 2) == {"--max-running-requests": "28"}


def test_runtime_oom_headroom_from_the_shortfall(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.93 GiB. GPU 0 has a total capacity of 79.14 GiB "
                   "of which 3.79 GiB is free. Process 13118 has 75.33 GiB memory in use. Of the allocated memory 73.96 GiB is "
                   "allocated by PyTorch, with 34.50 MiB allocated in private pools (e.g., CUDA Graphs), and 639.99 MiB is reserved "
                   "by PyTorch but unallocated.\n")
    report = analyze([str(log)])
    f = report.findings[0]
    assert f.category == "oom.runtime_prefill"
    mfs = next(x for x in f.fix if x.flag == "--mem-fraction-static")
    # 1.14 GiB missing + 1 GiB margin over ~78 GiB free at start: at least 0.027 below SGLang's automatic fraction
    auto = f.memory["mem_fraction_static"]
    assert float(mfs.value) <= auto - 0.027


def test_page_granular_kv_exhaustion(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("RuntimeError: Decode out of memory. Try to lower your batch size.\nTry to allocate 148 tokens.\n"
                   "Avaliable tokens: 2048\nself.token_to_kv_pool_allocator.available_size()=2048\n")
    report = analyze([str(log)], options=None)
    f = report.findings[0]
    assert f.category == "oom.runtime_decode"
    assert fixes(report, 1) == {"--page-size": "1"}


def test_dp_attention_prefills_a_share_of_the_chunk_and_the_fix_is_in_the_flags_units():
    """ServerArgs divides --chunked-prefill-size among the DP-attention ranks: the memory model sizes
    one rank's activations from that share, and a smaller chunk is proposed in the flag's own units
    (fresh23/e04: 65536 over 8 ranks is 8192 a rank; the option halves that to 4096 a rank, 32768)."""
    from pathlib import Path
    from diag import memory as M
    from diag.analyze import analyze
    dep = M.Deployment.from_flags({"--tp-size": 8, "--dp-size": 8, "--enable-dp-attention": True,
                                   "--chunked-prefill-size": 65536}, "0.5.14")
    assert dep.chunked_prefill_size == 8192
    assert M.Deployment.from_flags({"--tp-size": 8, "--dp-size": 8, "--chunked-prefill-size": 65536},
                                   "0.5.14").chunked_prefill_size == 65536
    log = Path(__file__).parent / "data" / "fresh23" / "e04-pd-prefill-hsa-oom-cascades-tcpstore-hang.log"
    report = analyze([str(log)])
    top = report.findings[0]
    assert top.category == "oom.runtime_prefill"
    chunk = [f for f in top.fix if f.flag == "--chunked-prefill-size"]
    assert chunk and chunk[0].value == "32768" and chunk[0].was in (65536, "65536")
