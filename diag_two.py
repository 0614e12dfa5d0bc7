import os, sys, json
sys.path.insert(0, "tests/integration")
import kgymtest as k, test_python as tp
tp.PY = "/opt/torch/.venv/bin/python3"
d = tp.PyDaemon(python_conf={"interpreter": tp.PY}, gpus="0", kgymd_conf="workers_per_gpu = 1",
                workers_conf="cpu_workers = 1")
try:
    d.start()
    for i in range(2):
        t = tp.example("relu", "triton_correct", task_id="diag%d" % i, device="cuda", num_perf_trials=10)
        t["payload"]["backend"] = "triton"
        r = tp.run_tasks(d, [t], timeout=600)["diag%d" % i]
        print(i, r.get("correctness"), r.get("error_code"), (r.get("error_message") or "")[:3000], r["metadata"].get("triton_cache_seed"), r["metadata"].get("candidate_first_call_ms"))
    print("\n".join(l[:220] for l in (r["metadata"].get("diag") or "").splitlines()[:30]))
finally:
    d.cleanup()
