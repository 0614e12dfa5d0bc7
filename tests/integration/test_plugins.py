#!/usr/bin/env python3
"""The loader refuses bad plugins, says why, and serves the good ones."""
import os
import shutil

import kgymtest as k

BAD = {
    "bad_abi_major": "ABI",
    "bad_abi_minor": "ABI",
    "bad_size": "size",
    "bad_signature": "signature",
    "bad_missing_op": "start",
    "bad_no_symbol": "kgym_plugin",
    "bad_kind": "kind",
}


def test_refusals_listed_and_logged():
    d = k.Daemon(plugins=())
    first = os.path.join(d.dir, "first")
    second = os.path.join(d.dir, "second")
    os.makedirs(first)
    os.makedirs(second)

    def put(dirname, name, mode=0o755):
        dst = os.path.join(dirname, name + ".so")
        shutil.copyfile(k.test_plugin(name), dst)
        os.chmod(dst, mode)

    put(first, "selftest")
    for name in BAD:
        put(second, name)
    put(second, "dup_selftest")            # same name as the loaded selftest
    shutil.copyfile(k.test_plugin("selftest"), os.path.join(second, "writable.so"))
    os.chmod(os.path.join(second, "writable.so"), 0o664)
    d2 = k.Daemon(plugin_dirs=[first, second], state=d.dir)
    try:
        d2.start()
        r = d2.request({"op": "plugins"})
        k.check([p["name"] for p in r["plugins"]] == ["selftest"], r["plugins"])
        refused = {os.path.basename(x["path"])[:-3]: x["reason"] for x in r["refused"]}
        for name, word in BAD.items():
            k.check(name in refused, "%s refused: %r" % (name, refused))
            k.check(word in refused[name], "%s reason %r names %r" % (name, refused[name], word))
        k.check("duplicate" in refused.get("dup_selftest", ""), refused)
        k.check("writable" in refused.get("writable", ""), refused)
        log = d2.read_log()
        for name in list(BAD) + ["dup_selftest", "writable"]:
            k.check(name + ".so" in log, "refusal of %s logged" % name)
        # the good plugin serves tasks despite the refusals
        r = d2.request({"op": "submit", "task": k.selftest_task(0), "wait": True})
        k.check(r["accepted"], r)
        d2.stop()
    finally:
        d2.cleanup()


if __name__ == "__main__":
    k.run([test_refusals_listed_and_logged])
