"""The mutants of tests/mutation/run: one planted defect per guarantee.

Each entry breaks one guarantee that README.md or a man page claims, by
replacing one exact snippet of source (`old`, which must occur exactly
once: a stale mutant fails loudly instead of testing nothing) with `new`.
`tests` names what must kill it:
  "tests/unit/NAME"                      a cmocka program of the build
  "tests/integration/FILE.py[:t1,t2]"    an integration test file, or only
                                         the named test functions in it
  "tests/.../FILE.py ARG..."             a test script with its arguments
A mutant is KILLED when one of them fails (exit status neither 0 nor 77)
or runs past its time limit.  gpu=True: its killing tests need a GPU
(tests/gpu/run); elsewhere it is reported SKIP with the reason.
"""

JUDGE = "plugins/python/kgym_judge.py"
JUDGE_TIMING = "plugins/python/kgym_judge_timing.py"
HARNESS = "plugins/python/kgym_harness.py"
SUPERVISOR = "plugins/python/kgym_supervisor.py"
EXECUTOR = "plugins/python/kgym_executor.py"
TIMING = "plugins/nvrtc/timing.c"
NVRTC_EVAL = "tests/unit/test_nvrtc_eval"
TJ = "tests/integration/test_judge.py"
TP = "tests/integration/test_python.py"


def M(name, guarantee, file, old, new, tests, gpu=False):
    return {"name": name, "guarantee": guarantee, "file": file, "old": old, "new": new,
            "tests": tests, "gpu": gpu}


MUTANTS = [
    # ---------------------------------------------------------------- native
    M("native_no_lock", "native timing holds the GPU lock exclusive", TIMING,
      "	if ((error = nvrtc_host->gpu_lock(KGYM_GPU_EXCLUSIVE)) < 0)",
      "	if (0 && (error = nvrtc_host->gpu_lock(KGYM_GPU_EXCLUSIVE)) < 0)",
      [NVRTC_EVAL]),
    M("native_lock_fails_open", "no GPU lock to take: no timing (fail closed)", TIMING,
      "	    sizeof(nvrtc_host->phase) || nvrtc_host->gpu_lock == NULL)\n",
      "	    sizeof(nvrtc_host->phase) || nvrtc_host->gpu_lock == NULL)\n"
      "		if (0)\n",
      [NVRTC_EVAL]),
    M("native_inputs_unchecked_timed", "inputs checked on every timed call", TIMING,
      "		ok &= hash_after[i] == hash_fresh[i];",
      "		ok &= timed_call != 0 || hash_after[i] == hash_fresh[i];",
      [NVRTC_EVAL]),
    M("native_first_timed_call_checked", "every timed call verified", TIMING,
      "		ok &= cmp[o].mismatches == 0;",
      "		ok &= timed_call > 1 || cmp[o].mismatches == 0;",
      [NVRTC_EVAL]),
    M("native_fixed_timing_seed", "fresh inputs (a new secret seed) per timed call", TIMING,
      "		timing_round(ev, value_seed(ev->seed, VALUE_TAG_TIMING, k), k, when, time_ref,",
      "		timing_round(ev, value_seed(ev->seed, VALUE_TAG_TIMING, 0), k, when, time_ref,",
      [NVRTC_EVAL]),
    M("native_l2_flush_first_20", "L2 flushed before every call", TIMING,
      "	    device_flush_l2(flush, (uint32_t)seed, &cause) < 0)\n		goto fail;",
      "	    (ev->timed_checks < 20 && device_flush_l2(flush, (uint32_t)seed, &cause) < 0))\n		goto fail;",
      [NVRTC_EVAL]),
    M("native_parse_at_start", "a native payload parsed once in the daemon",
      "plugins/common/native_workflow.c",
      "	if ((np = parse_memo_take(nw_memo, payload)) == NULL &&",
      "	if ((np = NULL) == NULL &&",
      ["tests/unit/test_native_workflow"]),
    M("native_cubin_by_value", "compiled cubins travel by cache key, not through kgymd",
      "plugins/nvrtc/compile.c",
      "	if (out.ok && out.cache_key[0] != '\\0') {",
      "	if (0) {",
      ["tests/unit/test_compile"]),
    M("native_no_poison", "outputs poisoned before every call", "plugins/nvrtc/call.c",
      "		if ((error = device_poison(&outs[i], pb->outputs[i].dtype,",
      "		if (0 && (error = device_poison(&outs[i], pb->outputs[i].dtype,",
      [NVRTC_EVAL]),
    # ---------------------------------------------------------------- python
    M("py_stash_first_only", "every timed call verified (not a sample)", JUDGE_TIMING,
      "        for what, seed, got in stash:",
      "        for what, seed, got in stash[:1]:",
      [TJ + ":test_right_where_checked_always_caught"]),
    M("py_timed_unverified", "timed calls verified, not only correctness trials", JUDGE_TIMING,
      "            self.timed_verdict(what, compare_outputs(want, got, self.job), None)",
      "            self.timed_verdict(what, None, None)",
      [TJ + ":test_right_where_checked_always_caught"]),
    M("py_one_trial_unverified", "every correctness trial's outputs compared", JUDGE,
      "        c = compare_outputs(want, got, self.job)\n        self.checked_calls += 1",
      "        c = compare_outputs(want, got if self.checked_calls != 2 else want, self.job)\n"
      "        self.checked_calls += 1",
      [TJ + ":test_wrong_at_one_trial_caught"]),
    M("py_reused_seed", "a fresh secret seed per call", JUDGE,
      "        return derive_seed(self.base, tag, self.serial)",
      "        return derive_seed(self.base, tag, 0)",
      [TJ + ":test_cached_first_output_caught"]),
    M("py_no_changed_input", "inputs compared with the judge's copy after each call", JUDGE,
      "    def changed_input(self, inputs, j=0):\n",
      "    def changed_input(self, inputs, j=0):\n        return None\n",
      [TJ + ":test_mutate_inputs_timed_caught"]),
    M("py_done_before_go_unchecked", "nothing of a call happens before GO", JUDGE,
      "        if ctl.words[CTL_DONE] == k or not all(self.poison_intact(self.slot(peer.outputs, j, n_out), f)\n"
      "                                               for j, f in enumerate(fills)):",
      "        if False:",
      [TJ + ":test_work_before_go_caught"]),
    M("py_static_allows_pickle", "the static checks refuse unpickling (code they cannot see)",
      "plugins/python/kgym_static.py",
      '    "pickle": "unpickling (running code the checks cannot see)",\n',
      '',
      ["tests/integration/test_static.py"]),
    M("py_candidate_blames_kgymd", "the candidate's process cannot report kgymd's or the reference's failure",
      JUDGE,
      "            if peer.tainted and code not in CANDIDATE_CODES:\n",
      "            if False:\n",
      [TJ + ":test_candidate_cannot_blame_kgymd"]),
    M("py_round_checks_first_only", "every call of a timing round is checked, not only its first",
      "plugins/python/kgym_judge_timing.py",
      "        for j in range(k):\n            self.stash.append",
      "        for j in range(1):\n            self.stash.append",
      [TJ + ":test_rounds_time_and_check_every_call"]),
    M("py_judge_death_blames_reference", "a judge killed outside the reference's code is kgymd's error, "
      "not the reference's", SUPERVISOR,
      "                if code == \"SANDBOX_VIOLATION\" and in_reference:\n",
      "                if code == \"SANDBOX_VIOLATION\":\n",
      [TJ + ":test_judge_death_blamed_where_it_happened"]),
    M("py_no_poison", "the executor's outputs poisoned before each call", JUDGE,
      "    def poison(self, outs):\n",
      "    def poison(self, outs):\n        return\n",
      [TJ + ":test_outputs_poisoned"]),
    M("py_clock_before_clone", "the clock stops after the judge's copy of the outputs", JUDGE,
      "            if self.gpu:\n                torch.cuda.synchronize()\n"
      "            ms = (time.perf_counter() - t0) * 1e3\n        finally:\n",
      "            ms = (time.perf_counter() - t0) * 1e3\n"
      "            if self.gpu:\n                torch.cuda.synchronize()\n        finally:\n",
      # On a CPU the copy is a memcpy of a few KiB: only a GPU's unfinished
      # work shows: a candidate that patched its executor's synchronize
      # away and left ~0.35 ms queued on a side stream (20 ms are caught as
      # wrong outputs either way: the judge's copy reads mid-work).  On an
      # H200 (2026-11-29) the cheat got 0.39 ms, its honest twin 0.38, and
      # 0.22 under this mutant -- which survived a test that asked only for
      # 0.15; the test now measures the cheat against the twin.
      ["tests/gpu/judge_gpu_tests.py:test_sync_patched_short_work"], gpu=True),
    M("py_executor_copy_unsynced", "the executor's copies complete inside the clock", EXECUTOR,
      "            try:\n                self.torch.cuda.synchronize()\n            except Exception:",
      "            try:\n                pass\n            except Exception:",
      # The outputs lie in the arena (no copy), so this synchronize is what
      # holds DONE until the forward's own work ends: a side stream's 20 ms
      # then end after DONE, read mid-work by the judge.
      ["tests/gpu/judge_gpu_tests.py:test_side_stream_honest"], gpu=True),
    M("py_judge_oom_system_error", "a problem too big for the judge's memory is the problem's (RESOURCE_ERROR)",
      JUDGE,
      "        if out_of_memory(e):\n            # The problem's size",
      "        if False:\n            # The problem's size",
      [TJ + ":test_judge_short_of_memory_is_the_problems"]),
    M("py_compare_chunk_index_local", "the comparison in chunks names the first wrong element",
      "plugins/python/kgym_judge_compare.py",
      "            first = at + int(bad.nonzero()[0][0])",
      "            first = int(bad.nonzero()[0][0])",
      [TJ + ":test_compare_chunked_as_whole"]),
    M("py_timed_check_lenient", "every timed call's outputs are checked at the problem's tolerance",
      "plugins/python/kgym_judge_compare.py",
      "        if not bool(torch.isclose(gd, rd, rtol=rtol, atol=atol, equal_nan=True).all()):\n            return False",
      "        if not bool(torch.isclose(gd, rd, rtol=10 * rtol, atol=10 * atol, equal_nan=True).all()):\n"
      "            return False",
      [TJ + ":test_compare_chunked_as_whole"]),
    M("py_decoy_bitwise", "a Triton decoy is caught whatever the last bits of its kernel's output",
      "plugins/python/kgym_judge_compare.py",
      "def nearly_same(a, b, rtol=1e-3):",
      "def nearly_same(a, b, rtol=0.0):",
      [TJ + ":test_compare_chunked_as_whole"]),
    M("py_memfds_unsealed", "shared memfds cannot be shrunk by the candidate", JUDGE,
      "        for fd in self.memfds.values():\n            seal_memfd(fd)\n",
      "        for fd in ():\n            seal_memfd(fd)\n",
      ["tests/exploits/run_python.py --device cpu --only shrink_shared_memfd"]),
    M("ref_cache_replaced_upward", "a reference timing measured under load never raises the cache's entry",
      "plugins/common/python_workflow.c",
      "	if (old != NULL && pw_median_ms(old) <=",
      "	if (0 && old != NULL && pw_median_ms(old) <=",
      [TP + ":test_reference_timing_cache"]),
    M("ref_cache_never_rechecked", "cache hits are measured again (reference_recheck)",
      "plugins/common/python_workflow.c",
      "	if (cfg.recheck == 1)\n		return true;",
      "	if (cfg.recheck == 1)\n		return false;",
      [TP + ":test_reference_timing_recheck"]),
    M("py_host_paths_kept", "error text names no place of the host", SUPERVISOR,
      "        return scrub_for_client(r, self.job_dir)\n",
      "        return r\n",
      [TP + ":test_no_host_paths_in_errors"]),
    M("py_arena_off", "nothing executor-side is subtracted from the judge's clock (the arena)", JUDGE,
      "        if not self.gpu or self.limits.get(\"output_arena\") is False:\n",
      "        if True:\n",
      ["tests/gpu/judge_gpu_tests.py:test_copy_skip_gains_nothing"], gpu=True),
    M("py_result_text_uncarriable", "a candidate's error text cannot break the result's way to the worker",
      "plugins/python/kgym_common.py",
      "        return value.replace(\"\\x00\", \"\\ufffd\").encode(\"utf-8\", \"replace\").decode(\"utf-8\")\n",
      "        return value\n",
      ["tests/exploits/run_python.py --device cpu --only error_text_breaks_protocol"]),
    M("py_base_exception_escapes", "any exception of a call is the candidate's RUNTIME_ERROR", EXECUTOR,
      "        except BaseException as e:  # noqa: BLE001 - GeneratorExit, SystemExit: still the model's exception\n",
      "        except Exception as e:  # noqa: BLE001\n",
      ["tests/exploits/run_python.py --device cpu --only base_exception_forward"]),
    M("py_arena_offsets_trusted", "an executor's word on where its outputs lie is checked, never just read", JUDGE,
      "        if at % slot.element_size() != 0 or at + n > peer.arena.numel():\n",
      "        if at % slot.element_size() != 0:\n",
      ["tests/integration/test_arena.py:test_judge_checks_offsets"]),
    M("py_proc_shared", "an executor's /proc shows no other process", "plugins/python/kgym_common.py",
      "    private_proc = limits.get(\"private_proc\", not gpu) is True and not exec_paths\n",
      "    private_proc = False\n",
      ["tests/exploits/run_python.py --device cpu --only read_host_processes"]),
    M("sandbox_proc_whole", "an executor's /proc shows no other process", "lib/sandbox_landlock.c",
      "		if (p->private_proc && strcmp(sandbox_system_paths[i].path, \"/proc\") == 0)\n",
      "		if (0 && p->private_proc && strcmp(sandbox_system_paths[i].path, \"/proc\") == 0)\n",
      ["tests/exploits/run_python.py --device cpu --only read_host_processes"]),
    M("py_seed_to_candidate", "seeds never sent to the candidate", SUPERVISOR,
      "\"job\": dict(common, kernel_code=req[\"kernel_code\"], compiler_profile=profile,",
      "\"job\": dict(common, kernel_code=req[\"kernel_code\"], compiler_profile=profile, "
      "seed_base=job[\"seed_base\"],",
      [TJ + ":test_seed_scan_finds_nothing"]),
    M("py_job_read_before_fork", "the job is read after the candidate's fork", HARNESS,
      "        job = Job(z)\n        job.fork_candidate()\n",
      "        job = Job(z)\n        sys.stdin = __import__(\"io\").StringIO(sys.stdin.read())\n"
      "        job.fork_candidate()\n",
      [TJ + ":test_seed_scan_finds_nothing"]),
    M("py_calibrate_with_candidate", "calibration measured with the reference executor only", JUDGE_TIMING,
      "        out = [self.round(self.ref, [inputs] * self.k, mode=\"empty\",",
      "        out = [self.round(self.cand, [inputs] * self.k, mode=\"empty\",",
      [TJ + ":test_clock_patch_has_no_effect"]),
    M("py_no_signed_trial", "a signed-input trial when every input is non-negative", JUDGE,
      "            if k == len(plan) - 1 and nonneg and not any(s for _, s in plan):",
      "            if False and k == len(plan) - 1 and nonneg and not any(s for _, s in plan):",
      [TP + ":test_identity_fails_signed_trial"]),
    M("py_static_import_allowed", "static checks refuse forbidden imports", "plugins/python/kgym_static.py",
      "            why = self.module_forbidden(a.name)",
      "            why = None",
      [TP + ":test_forbidden_import"]),
    # ---------------------------------------------------------------- sandbox
    M("sandbox_seccomp_allow_all", "the worker's seccomp filter kills what it does not allow",
      "lib/sandbox.c",
      "	ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);",
      "	ctx = seccomp_init(SCMP_ACT_ALLOW);",
      ["tests/unit/test_sandbox"]),
    M("sandbox_arch_prctl_any", "arch_prctl outside the compiler profile: AMX permission codes only",
      "lib/sandbox.c",
      "	if (cond == SB_COND_XCOMP && p->allow_exec_compilers)\n",
      "	if (cond == SB_COND_XCOMP)\n",
      ["tests/unit/test_sandbox"]),
    M("sandbox_no_landlock", "the worker's Landlock domain is in force", "lib/sandbox_landlock.c",
      "	if (syscall(SYS_landlock_restrict_self, ruleset, flags) == -1) {",
      "	if (0) {",
      ["tests/unit/test_sandbox"]),
    M("sandbox_thread_unconfined", "the compile thread's own Landlock domain is in force",
      "lib/sandbox_landlock.c",
      "	if (syscall(SYS_landlock_restrict_self, ruleset, 0) == -1) {",
      "	if (0) {",
      ["tests/unit/test_sandbox", "tests/unit/test_compile"]),
    # ---------------------------------------------------------------- lifecycle
    M("lifecycle_no_socket_activation", "kgymd serves on the socket systemd hands over",
      "kgymd/main.c",
      "	int n = sd_listen_fds(1);\n",
      "	int n = 0;\n",
      ["tests/integration/test_lifecycle.py:test_socket_activation"]),
    M("lifecycle_no_ready", "kgymd tells systemd it is ready (Type=notify)",
      "kgymd/notify.c",
      "	notify_send(\"READY=1\");\n",
      "",
      ["tests/integration/test_lifecycle.py:test_sd_notify_ready_and_stopping"]),
    M("lifecycle_workers_outlive", "workers die with kgymd",
      "kgymd/proc.c",
      "	prctl(PR_SET_PDEATHSIG, SIGKILL);\n",
      "",
      ["tests/integration/test_lifecycle.py:test_workers_die_with_kgymd"]),
    # ---------------------------------------------------------------- store
    # Since the store writer (writer.c), "accepted" is sent from the
    # commit's completion: the mutant is a commit that says it landed and
    # did not (a ROLLBACK answered as success).
    M("store_accept_before_commit", "on disk before \"accepted\"", "kgymd/store.c",
      "	[SQL_COMMIT] = \"COMMIT\",",
      "	[SQL_COMMIT] = \"ROLLBACK\",",
      ["tests/integration/test_durability.py:test_kill9_midway"]),
    M("store_no_requeue", "every task terminal: running tasks requeued at start-up", "kgymd/store.c",
      "	[SQL_REQUEUE] = \"UPDATE tasks SET state = 0\"",
      "	[SQL_REQUEUE] = \"UPDATE tasks SET state = 1\"",
      ["tests/integration/test_durability.py:test_kill9_midway"]),
    M("store_stale_not_failed", "every task terminal: out of attempts fails", "kgymd/store.c",
      "		err = store_fail_stale(store, stale[i].id, stale[i].attempt, now_ms);",
      "		err = ((void)store_fail_stale, 0);",
      ["tests/integration/test_durability.py:test_max_attempts_then_system_error"]),
    # ---------------------------------------------------------------- gateway
    M("principal_sees_all", "a token sees only its own tasks, enforced in kgymd", "kgymd/ops.c",
      "	if (strcmp(owner, who->owner) == 0)\n		return true;",
      "	if (strncmp(owner, who->owner, 5) == 0)\n		return true;",
      ["tests/integration/test_gateway_principal.py:test_principals_are_separate",
       "tests/integration/test_http.py:test_tokens"]),
    M("gateway_tokens_ignored", "bearer tokens checked by kgymd-http", "kgymd-http/server.c",
      "	if (srv.tokens == NULL)\n		return true;",
      "	if (1)\n		return true;",
      ["tests/integration/test_http.py:test_tokens"]),
    M("gateway_batch_lost", "no synchronous /evaluate lost under load", "kgymd-http/coalesce.c",
      "		if (b->answered[i] || strcmp(b->ids[i], id) != 0)\n			continue;",
      "		if (b->answered[i] || strcmp(b->ids[i], id) != 0 || i == 7)\n			continue;",
      ["tests/integration/test_http_load.py:test_load_none_lost"]),
]
