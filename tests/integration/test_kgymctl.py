#!/usr/bin/env python3
"""kgymctl against a private kgymd: every command, output formats, exit status.

kgymctl runs as a subprocess with KGYM_SOCKET pointing at the daemon; its
standard output is a pipe, so it prints the plain per-task lines scripts rely
on (no progress bar).  Exit statuses are part of its interface (kgymctl(1)):
0 success, 1 a task failed / was cancelled / incorrect / partly rejected,
2 usage, connection, protocol or daemon errors.
"""
import json
import os
import pty
import subprocess
import tempfile
import time

import kgymtest as k


def kgymctl(d, *args, stdin=None, socket=None, timeout=60):
    """Run kgymctl; returns (exit status, stdout, stderr)."""
    env = dict(os.environ)
    env["KGYM_SOCKET"] = socket if socket is not None else d.socket
    p = subprocess.run([k.kgymctl_path()] + list(args), input=stdin, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def expect(res, rc, what):
    got, out, err = res
    k.check(got == rc, "%s: exit %d, expected %d\nstdout: %s\nstderr: %s" % (what, got, rc, out, err))
    return out, err


def write_file(dirname, name, text):
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def task_json(**kw):
    return json.dumps(k.selftest_task(**kw))


def test_info_commands():
    with k.Daemon() as d:
        out, _ = expect(kgymctl(d, "hello"), 0, "hello")
        k.check("kgymd" in out and "selftest" in out, out)
        out, _ = expect(kgymctl(d, "health"), 0, "health")
        k.check(out.startswith("healthy"), out)
        out, _ = expect(kgymctl(d, "plugins"), 0, "plugins")
        lines = out.splitlines()
        k.check(lines[0].split()[:3] == ["NAME", "KIND", "VERSION"], out)
        k.check(any(l.split()[:2] == ["selftest", "workflow"] for l in lines[1:]), out)
        out, _ = expect(kgymctl(d, "stats"), 0, "stats")
        k.check("uptime" in out and "queued 0" in out and "LATENCY_MS" in out, out)
        out, _ = expect(kgymctl(d, "workers"), 0, "workers")
        k.check("workers per GPU: 1" in out, out)
        gpus = d.request({"op": "workers"})["gpus"]
        if gpus:
            lines = out.splitlines()
            k.check(lines[0].split()[:2] == ["GPU", "NAME"], out)
            k.check([l.split()[0] for l in lines[1:1 + len(gpus)]] == [str(g["index"]) for g in gpus], out)
        else:
            k.check(out.startswith("no GPUs\n"), out)
        out, _ = expect(kgymctl(d, "list"), 0, "list of nothing")
        k.check(out.splitlines() == [out.splitlines()[0]] and out.startswith("TASK_ID"), out)
        out, _ = expect(kgymctl(d, "-V"), 0, "-V")
        k.check(out.startswith("kgymctl "), out)
        out, _ = expect(kgymctl(d, "--help"), 0, "--help")
        k.check("submit" in out and "Exit status" in out, out)


def test_submit_wait_three():
    with k.Daemon() as d, tempfile.TemporaryDirectory() as tmp:
        path = write_file(tmp, "three.json", json.dumps([k.selftest_task(10) for _ in range(3)]))
        out, _ = expect(kgymctl(d, "submit", "--wait", path), 0, "submit --wait")
        lines = out.splitlines()
        k.check(len(lines) == 3, out)
        for line in lines:
            f = line.split()
            k.check(f[1:3] == ["completed", "correct"] and "speedup=1" in f, line)
        ids = [l.split()[0] for l in lines]
        k.check(len(set(ids)) == 3, ids)
        # The daemon agrees: each of them completed.
        for tid in ids:
            r = d.request({"op": "status", "task_id": tid})
            k.check(r["ok"] and r["state"] == "completed", r)
        out, _ = expect(kgymctl(d, "list"), 0, "list")
        k.check(sorted(l.split()[0] for l in out.splitlines()[1:]) == sorted(ids), out)
        out, _ = expect(kgymctl(d, "list", "--state", "completed", "--limit", "2"), 0, "list --limit")
        k.check(len(out.splitlines()) == 3, out)


def test_submit_formats_and_priority():
    with k.Daemon() as d, tempfile.TemporaryDirectory() as tmp:
        single = write_file(tmp, "one.json", json.dumps(k.selftest_task(task_id="single"), indent=2))
        lines = write_file(tmp, "many.jsonl", "%s\n\n%s\n" % (task_json(task_id="l1"), task_json(task_id="l2")))
        out, _ = expect(kgymctl(d, "submit", "--priority", "high", single, lines), 0, "submit 3 files")
        k.check(sorted(out.splitlines()) == ["l1 queued", "l2 queued", "single queued"], out)
        for tid in ("single", "l1", "l2"):
            r = d.request({"op": "status", "task_id": tid})
            k.check(r["ok"] and r["priority"] == "high", r)
        # The same id again is the same task: idempotent, marked existing.
        out, _ = expect(kgymctl(d, "submit", single), 0, "resubmit")
        k.check(out.startswith("single ") and "(existing)" in out, out)


def test_submit_stdin_and_verdicts():
    with k.Daemon() as d:
        text = "\n".join([task_json(task_id="s-ok"), task_json(task_id="s-bad", action="incorrect"),
                          task_json(task_id="s-fail", action="fail")]) + "\n"
        out, _ = expect(kgymctl(d, "submit", "--wait", "-", stdin=text), 1, "mixed verdicts")
        got = {l.split()[0]: l for l in out.splitlines()}
        k.check(sorted(got) == ["s-bad", "s-fail", "s-ok"], out)
        k.check(got["s-ok"].startswith("s-ok completed correct"), out)
        k.check(got["s-bad"].startswith("s-bad completed incorrect"), out)
        k.check(got["s-fail"].startswith("s-fail failed RUNTIME_ERROR: selftest:"), out)
        out, _ = expect(kgymctl(d, "submit", "-", stdin=task_json(task_id="s-plain")), 0, "stdin")
        k.check(out == "s-plain queued\n", out)
        # Exit status of status/result follows the task.
        expect(kgymctl(d, "wait", "s-plain"), 0, "wait ok task")
        out, _ = expect(kgymctl(d, "result", "s-ok"), 0, "result ok")
        k.check("correctness" in out and "yes" in out, out)
        out, _ = expect(kgymctl(d, "result", "s-fail"), 1, "result failed")
        k.check("error_message:\nselftest: the task asked to fail" in out, out)
        expect(kgymctl(d, "result", "s-bad"), 1, "result incorrect")
        expect(kgymctl(d, "status", "s-fail"), 1, "status failed")
        out, _ = expect(kgymctl(d, "status", "s-ok"), 0, "status ok")
        k.check("state" in out and "completed" in out and "finished" in out, out)


def test_counts_summary_and_earlier_results():
    """incorrect is counted apart from failed; a batch ends with a summary;
    a re-submitted id says that its result is the earlier submission's."""
    with k.Daemon() as d:
        text = "\n".join([task_json(task_id="c-ok"), task_json(task_id="c-bad", action="incorrect"),
                          task_json(task_id="c-bad2", action="incorrect"),
                          task_json(task_id="c-fail", action="fail")]) + "\n"
        out, err = expect(kgymctl(d, "submit", "--wait", "-", stdin=text), 1, "batch")
        k.check(len(out.splitlines()) == 4, out)
        k.check("kgymctl: 4 tasks: 1 correct, 2 incorrect, 1 failed, 0 cancelled\n" in err, err)
        k.check("submitted before" not in err, err)
        # The same ids again: the same tasks, their earlier results, said so.
        out, err = expect(kgymctl(d, "submit", "--wait", "-", stdin=text), 1, "resubmitted batch")
        k.check(len(out.splitlines()) == 4, out)
        k.check("kgymctl: c-bad was submitted before: kgymd keeps that task (completed) "
                "and this is its earlier result" in err, err)
        k.check("(4 of them submitted before: earlier results)" in err, err)
        out, _ = expect(kgymctl(d, "--json", "submit", "--wait", "-", stdin=task_json(task_id="c-ok")), 0,
                        "resubmitted, json")
        msgs = [json.loads(l) for l in out.splitlines()]
        k.check(len(msgs) == 1 and msgs[0]["existing"] is True and msgs[0]["task_id"] == "c-ok", msgs)
        # wait: the same counts, and a summary for more than one id.
        out, err = expect(kgymctl(d, "--json", "wait", "c-ok", "c-bad", "c-fail", "c-none"), 2, "wait json")
        msgs = {m["task_id"]: m for m in (json.loads(l) for l in out.splitlines())}
        k.check(sorted(msgs) == ["c-bad", "c-fail", "c-none", "c-ok"], msgs)
        k.check(msgs["c-none"]["state"] == "not found" and msgs["c-fail"]["state"] == "failed", msgs)
        k.check("4 tasks: 1 correct, 1 incorrect, 1 failed, 0 cancelled, 1 not found" in err, err)


def test_rejected():
    with k.Daemon() as d:
        text = task_json(task_id="r-ok") + "\n" + json.dumps({"workflow": "no-such-workflow"}) + "\n"
        out, err = expect(kgymctl(d, "submit", "-", stdin=text), 1, "one of two rejected")
        k.check(out == "r-ok queued\n", out)
        k.check(err.startswith("1 rejected: bad_request: "), err)
        _, err = expect(kgymctl(d, "submit", "-", stdin=json.dumps({"workflow": 5})), 2, "all rejected")
        k.check(err.startswith("0 rejected: "), err)


def test_json_output():
    with k.Daemon() as d, tempfile.TemporaryDirectory() as tmp:
        path = write_file(tmp, "two.json", json.dumps([k.selftest_task(5), k.selftest_task(5)]))
        out, _ = expect(kgymctl(d, "--json", "submit", "--wait", path), 0, "--json submit --wait")
        # One result per line: nothing else on stdout.
        msgs = [json.loads(l) for l in out.splitlines()]
        k.check(len(msgs) == 2 and all(m["state"] == "completed" and m["existing"] is False
                                       and m["result"]["task_id"] == m["task_id"] for m in msgs), msgs)
        tid = msgs[0]["task_id"]
        out, _ = expect(kgymctl(d, "result", tid, "--json"), 0, "result --json")
        msgs = [json.loads(l) for l in out.splitlines()]
        k.check(len(msgs) == 1 and msgs[0]["result"]["task_id"] == tid, msgs)
        for cmd in ("hello", "health", "stats", "workers", "plugins", "list"):
            out, _ = expect(kgymctl(d, "--json", cmd), 0, "--json " + cmd)
            msgs = [json.loads(l) for l in out.splitlines()]
            k.check(len(msgs) == 1 and msgs[0]["ok"] is True and msgs[0]["v"] == 1, (cmd, msgs))


def test_batches():
    """More tasks than one request carries: several submits on one connection."""
    with k.Daemon() as d, tempfile.TemporaryDirectory() as tmp:
        n = 2500
        path = write_file(tmp, "many.jsonl", "".join(task_json() + "\n" for _ in range(n)))
        out, err = expect(kgymctl(d, "--json", "submit", "--wait", path, timeout=120), 0, "2500 tasks")
        msgs = [json.loads(l) for l in out.splitlines()]
        k.check(len(msgs) == n and len({m["task_id"] for m in msgs}) == n
                and all(m["result"]["correctness"] is True for m in msgs), len(msgs))
        k.check("kgymctl: %d tasks: %d correct, 0 incorrect, 0 failed, 0 cancelled\n" % (n, n) in err, err)
        # Three submit requests carried them (1,000 tasks each at most).
        st = d.request({"op": "stats"})
        k.check(st["requests"]["submit"] >= 3, st["requests"])
        out, _ = expect(kgymctl(d, "submit", "--wait", path, timeout=120), 0, "2500 tasks, lines")
        lines = out.splitlines()
        k.check(len(lines) == n and all(" completed correct " in l for l in lines), lines[:3])


def test_progress_bar_on_terminal():
    """On a terminal, submit --wait draws a bar on stderr and ends with a table."""
    with k.Daemon() as d, tempfile.TemporaryDirectory() as tmp:
        tasks = [k.selftest_task(5) for _ in range(4)] + [k.selftest_task(action="fail")]
        path = write_file(tmp, "five.json", json.dumps(tasks))
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["KGYM_SOCKET"] = d.socket
            os.execv(k.kgymctl_path(), ["kgymctl", "submit", "--wait", path])
        chunks = []
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        text = b"".join(chunks).decode(errors="replace")
        k.check(os.waitstatus_to_exitcode(status) == 1, "exit %r: %s" % (status, text))
        k.check("] 5/5 done, 0 incorrect, 1 failed" in text and "\r[" in text, text)
        rows = [l for l in text.replace("\r\n", "\n").split("\n") if l and not l.startswith("\r")]
        header = [l for l in rows if l.startswith("TASK_ID")]
        k.check(len(header) == 1, text)
        body = rows[rows.index(header[0]) + 1:]
        k.check(body[-1] == "kgymctl: 5 tasks: 4 correct, 0 incorrect, 1 failed, 0 cancelled", text)
        body = body[:-1]
        k.check(len(body) == 5 and sum(" failed " in l for l in body) == 1, text)


def test_cancel_and_wait():
    with k.Daemon() as d:
        out, _ = expect(kgymctl(d, "submit", "-", stdin=task_json(task_id="long", delay_ms=60000)), 0, "submit long")
        k.check(out == "long queued\n", out)
        # Still running: no result yet, and a short wait leaves it pending.
        _, err = expect(kgymctl(d, "result", "long"), 2, "result not ready")
        k.check(err.startswith("kgymctl: not_ready: "), err)
        t0 = time.time()
        out, _ = expect(kgymctl(d, "wait", "--timeout", "0.3", "long"), 1, "wait timeout")
        k.check(out == "long pending\n" and time.time() - t0 < 20, out)
        out, _ = expect(kgymctl(d, "cancel", "long"), 0, "cancel")
        k.check(out == "long cancelled\n", out)
        r = d.request({"op": "status", "task_id": "long"})
        k.check(r["state"] == "cancelled", r)
        out, _ = expect(kgymctl(d, "wait", "long"), 1, "wait on cancelled")
        k.check(out.startswith("long cancelled"), out)
        out, _ = expect(kgymctl(d, "cancel", "long"), 0, "cancel again")
        k.check("not cancelled" in out, out)
        expect(kgymctl(d, "status", "long"), 1, "status cancelled")


def test_errors():
    with k.Daemon() as d, tempfile.TemporaryDirectory() as tmp:
        bad_sock = os.path.join(tmp, "nowhere.sock")
        _, err = expect(kgymctl(d, "hello", socket=bad_sock), 2, "bad socket")
        k.check(("kgymctl: cannot connect to %s: No such file or directory" % bad_sock) in err
                and "KGYM_SOCKET" in err, err)
        _, err = expect(kgymctl(d, "-s", bad_sock, "health"), 2, "-s bad socket")
        k.check(bad_sock in err, err)
        _, err = expect(kgymctl(d, "frobnicate"), 2, "unknown command")
        k.check("unknown command" in err, err)
        expect(kgymctl(d), 2, "no command")
        expect(kgymctl(d, "list", "--limit", "many"), 2, "bad --limit")
        expect(kgymctl(d, "submit", "--priority", "urgent", "-", stdin="{}"), 2, "bad --priority")
        expect(kgymctl(d, "status"), 2, "status without id")
        _, err = expect(kgymctl(d, "status", "no-such-task"), 2, "status unknown id")
        k.check(err.startswith("kgymctl: not_found: "), err)
        expect(kgymctl(d, "wait", "no-such-task"), 2, "wait unknown id")
        bad = write_file(tmp, "bad.jsonl", task_json() + "\n" + task_json() + "\n" + '{"workflow": "selftest",\n')
        _, err = expect(kgymctl(d, "submit", bad), 2, "malformed JSON lines")
        k.check(err.startswith("kgymctl: %s:3: " % bad), err)
        bad = write_file(tmp, "bad.json", '{\n  "workflow": "selftest",\n  "payload": {"action": "ok",}\n}\n')
        _, err = expect(kgymctl(d, "submit", bad), 2, "malformed JSON object")
        k.check(err.startswith("kgymctl: %s:3: " % bad), err)
        _, err = expect(kgymctl(d, "submit", os.path.join(tmp, "missing.json")), 2, "missing file")
        k.check("missing.json" in err, err)
        # Nothing of the bad files reached the daemon.
        r = d.request({"op": "list"})
        k.check(r["tasks"] == [], r)


if __name__ == "__main__":
    k.run([
        test_info_commands,
        test_submit_wait_three,
        test_submit_formats_and_priority,
        test_submit_stdin_and_verdicts,
        test_rejected,
        test_json_output,
        test_counts_summary_and_earlier_results,
        test_batches,
        test_progress_bar_on_terminal,
        test_cancel_and_wait,
        test_errors,
    ])
