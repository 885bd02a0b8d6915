"""Output files (issue 22, docs/cli.md "Output files"): every command that writes a file goes
through one routine that never replaces what is not a regular file.

For each writing command (show --spec -o, export -o, discover -o, place --save-state,
release --save-state, simulate --write-trace, simulate --report DIR) and each kind of
target: a character device made with mknod (written through, stays a device), a FIFO with a
reader (the reader gets the bytes, the FIFO stays), a symlink relative and absolute (the
target gets the bytes atomically, the link stays), an existing 0640 file with a group (mode
and group kept), a directory (clear error, exit 1, nothing written), and, as an unprivileged
user, a read-only directory (clear error before any work, nothing written).
"""

import grp
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import threading
import unittest

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLUSTER = "preset:dgx-h100?nodes=2"
TRACE = os.path.join(SOURCE_DIR, "tests", "data", "traces", "native", "small.csv")
TOPO = os.path.join(SOURCE_DIR, "tests", "data", "discovery", "gb200-4gpu.topo")


def run(args, user=None, timeout=300):
    cmd = [TOPOSCHED, *args]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def writers(work):
    """(name, args with the output path as OUT, a check of the written text)."""
    state = os.path.join(work, "state-in.json")
    if not os.path.exists(state):
        r = run(["place", "--cluster", CLUSTER, "--gpus", "4", "--job", "a", "--save-state", state])
        assert r.returncode == 0, r.stderr
        os.chmod(state, 0o644)
    return [
        ("show", ["show", "--cluster", CLUSTER, "--spec", "-o", "OUT"], "dgx-h100-2n"),
        ("export", ["export", "--cluster", CLUSTER, "--to", "slurm-tree", "-o", "OUT"], "SwitchName="),
        ("discover", ["discover", "--topo-m", TOPO, "-o", "OUT"], "gb200-4gpu"),
        ("place", ["place", "--cluster", CLUSTER, "--gpus", "2", "--job", "b", "--state", state, "--save-state", "OUT"], '"b"'),
        ("release", ["release", "--cluster", CLUSTER, "--state", state, "--job", "a", "--save-state", "OUT"],
         "toposched-allocation-state"),
        ("simulate-trace", ["simulate", "--cluster", "preset:dgx-h100?nodes=16", "--trace", TRACE, "--policies", "topo",
                            "--write-trace", "OUT"], "train-1"),
        ("slurm-lua", ["slurm", "job-submit-lua", "--url", "http://127.0.0.1:7070", "-o", "OUT"], "slurm_job_submit"),
    ]


def substitute(args, out):
    return [out if a == "OUT" else a for a in args]


class OutputFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="toposched-out-")
        os.chmod(self.tmp, 0o755)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def leftovers(self, folder):
        return [n for n in os.listdir(folder) if ".tmp-" in n]

    def test_character_device_is_written_through_not_replaced(self):
        dev = os.path.join(self.tmp, "null")
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        for name, args, _ in writers(self.tmp):
            with self.subTest(command=name):
                r = run(substitute(args, dev))
                self.assertEqual(r.returncode, 0, r.stderr)
                st = os.lstat(dev)
                self.assertTrue(stat.S_ISCHR(st.st_mode), f"{name} replaced the device")
                self.assertEqual(st.st_rdev, os.makedev(1, 3))
                self.assertEqual(self.leftovers(self.tmp), [])

    def test_fifo_with_a_reader_gets_the_bytes(self):
        fifo = os.path.join(self.tmp, "pipe")
        os.mkfifo(fifo)
        for name, args, expect in writers(self.tmp):
            with self.subTest(command=name):
                got = []
                reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
                reader.start()
                r = run(substitute(args, fifo))
                reader.join(timeout=120)
                self.assertFalse(reader.is_alive())
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(expect, got[0])
                self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode), f"{name} replaced the FIFO")

    def test_symlinks_keep_the_link_and_write_the_target(self):
        os.mkdir(os.path.join(self.tmp, "real"))
        for kind in ("relative", "absolute", "dangling"):
            for name, args, expect in writers(self.tmp):
                with self.subTest(link=kind, command=name):
                    target = os.path.join(self.tmp, "real", f"{kind}-{name}.out")
                    if kind != "dangling":
                        with open(target, "w") as f:
                            f.write("old")
                    link = os.path.join(self.tmp, f"{kind}-{name}.link")
                    os.symlink(os.path.join("real", os.path.basename(target)) if kind != "absolute" else target, link)
                    r = run(substitute(args, link))
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertTrue(os.path.islink(link), f"{name} replaced the link")
                    with open(target) as f:
                        self.assertIn(expect, f.read())
                    self.assertEqual(self.leftovers(os.path.join(self.tmp, "real")), [])
                    self.assertEqual(self.leftovers(self.tmp), [])

    def test_existing_file_keeps_mode_and_group(self):
        group = grp.getgrnam("daemon").gr_gid if os.geteuid() == 0 else os.getegid()
        for name, args, expect in writers(self.tmp):
            with self.subTest(command=name):
                out = os.path.join(self.tmp, f"{name}.protected")
                with open(out, "w") as f:
                    f.write("old")
                os.chmod(out, 0o640)
                if os.geteuid() == 0:
                    os.chown(out, 0, group)
                r = run(substitute(args, out))
                self.assertEqual(r.returncode, 0, r.stderr)
                st = os.stat(out)
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o640)
                self.assertEqual(st.st_gid, group)
                with open(out) as f:
                    self.assertIn(expect, f.read())

    def test_new_file_gets_the_umask_mode(self):
        name, args, _ = writers(self.tmp)[1]
        out = os.path.join(self.tmp, "fresh.conf")
        r = subprocess.run(["sh", "-c", 'umask 027 && exec "$@"', "sh", TOPOSCHED, *substitute(args, out)],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o640)

    def test_directory_is_a_clear_error(self):
        folder = os.path.join(self.tmp, "folder")
        os.mkdir(folder)
        for name, args, _ in writers(self.tmp):
            with self.subTest(command=name):
                r = run(substitute(args, folder))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("is a directory", r.stderr)
                self.assertEqual(os.listdir(folder), [])
                self.assertEqual(self.leftovers(self.tmp), [])

    def test_report_folder_that_is_a_file_is_refused(self):
        not_dir = os.path.join(self.tmp, "report")
        with open(not_dir, "w") as f:
            f.write("keep")
        r = run(["simulate", "--cluster", "preset:dgx-h100?nodes=16", "--trace", TRACE, "--policies", "topo",
                 "--report", not_dir])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("not a folder", r.stderr)
        with open(not_dir) as f:
            self.assertEqual(f.read(), "keep")

    def test_report_folder_keeps_links_inside(self):
        report = os.path.join(self.tmp, "report")
        os.mkdir(report)
        os.mkdir(os.path.join(self.tmp, "kept"))
        os.symlink(os.path.join("..", "kept", "r.json"), os.path.join(report, "report.json"))
        r = run(["simulate", "--cluster", "preset:dgx-h100?nodes=16", "--trace", TRACE, "--policies", "topo",
                 "--report", report + "/"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"report: {report}/report.html", r.stdout)
        self.assertTrue(os.path.islink(os.path.join(report, "report.json")))
        with open(os.path.join(self.tmp, "kept", "r.json")) as f:
            self.assertIn('"policies"', f.read())

    def test_report_path_printed_with_one_separator(self):
        # Issue 23: `--report out/` (or `out//`) printed `out//report.html`.
        mooncake = os.path.join(self.tmp, "mooncake-head.jsonl")
        with open(os.path.join(SOURCE_DIR, "tests", "data", "traces", "mooncake", "conversation_trace.jsonl")) as f:
            head = [next(f) for _ in range(50)]
        with open(mooncake, "w") as f:
            f.writelines(head)
        commands = {
            "simulate": ["simulate", "--cluster", "preset:dgx-h100?nodes=16", "--trace", TRACE, "--policies", "topo"],
            "route": ["route", "--cluster", CLUSTER, "--trace", mooncake, "--policies", "kv"],
        }
        for name, args in commands.items():
            for suffix in ("/", "//"):
                with self.subTest(command=name, suffix=suffix):
                    report = os.path.join(self.tmp, f"{name}-report{len(suffix)}")
                    r = run([*args, "--report", report + suffix])
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn(f"report: {report}/report.html (and report.json", r.stdout)  # simulate adds ", jobs.csv"
                    self.assertNotIn("//", r.stdout.split("report: ")[1])
                    self.assertTrue(os.path.isfile(os.path.join(report, "report.json")))

    @unittest.skipUnless(os.geteuid() == 0, "switching to an unprivileged user needs root")
    def test_read_only_folder_as_unprivileged_user(self):
        nobody = pwd.getpwnam("nobody")
        ro = os.path.join(self.tmp, "ro")
        os.mkdir(ro, 0o555)
        state = os.path.join(self.tmp, "state-in.json")
        writers(self.tmp)  # creates the input state, readable by everyone
        for name, args, _ in writers(self.tmp):
            with self.subTest(command=name):
                out = os.path.join(ro, "out")
                r = run(substitute(args, out), user=str(nobody.pw_uid))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("cannot create files in", r.stderr)
                self.assertEqual(os.listdir(ro), [])
        r = run(["simulate", "--cluster", "preset:dgx-h100?nodes=16", "--trace", TRACE, "--policies", "topo",
                 "--report", os.path.join(ro, "report")], user=str(nobody.pw_uid))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(os.listdir(ro), [])
        # A file the unprivileged user owns in a folder it may write keeps its mode.
        mine = os.path.join(self.tmp, "mine")
        os.mkdir(mine)
        os.chown(mine, nobody.pw_uid, nobody.pw_gid)
        out = os.path.join(mine, "topology.conf")
        with open(out, "w") as f:
            f.write("old")
        os.chown(out, nobody.pw_uid, nobody.pw_gid)
        os.chmod(out, 0o640)
        r = run(["export", "--cluster", CLUSTER, "--to", "slurm-tree", "-o", out], user=str(nobody.pw_uid))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o640)
        self.assertEqual(os.stat(out).st_uid, nobody.pw_uid)
        del state


if __name__ == "__main__":
    unittest.main()
