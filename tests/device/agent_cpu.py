#!/usr/bin/env python3
# The agent's own cost with real NVML, as a user runs it: `berth agent` at the default 1 Hz
# GPU sampling, no workloads; CPU ticks from /proc over a window, and one /metrics scrape.
import os, subprocess, sys, tempfile, time, urllib.request, json
berth, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
d = tempfile.mkdtemp()
subprocess.run([berth, "keys", "generate", f"{d}/cp"], check=True, capture_output=True)
open(f"{d}/token", "w").write("device-token")
p = subprocess.Popen([berth, "agent", "--listen", "127.0.0.1:7999", "--state", f"{d}/state",
    "--trust", f"{d}/cp.pub", "--source", f"{d}/none.bundle.json", "--token-file", f"{d}/token"],
    stderr=open(f"{out}/agent.stderr", "w"))
def get(path):
    r = urllib.request.Request("http://127.0.0.1:7999" + path, headers={"authorization": "Bearer device-token"})
    return urllib.request.urlopen(r, timeout=5).read().decode()
for _ in range(100):
    try:
        s = json.loads(get("/v1/status"));
        if s["gpus"]["devices"]: break
    except Exception: pass
    time.sleep(0.1)
print("agent gpus:", json.dumps(s["gpus"]))
def ticks():
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
hz = os.sysconf("SC_CLK_TCK")
time.sleep(2)
t0, w0 = ticks(), time.time()
time.sleep(seconds)
t1, w1 = ticks(), time.time()
cpu = (t1 - t0) / hz
print(f"berth agent (release, NVML at 1 Hz, processes every 10th): {cpu*1000:.0f} ms CPU in {w1-w0:.1f} s = {100*cpu/(w1-w0):.3f}% of one core (tick {1000/hz:.0f} ms)")
m = get("/metrics")
open(f"{out}/metrics.txt", "w").write(m)
print("\n".join(l for l in m.splitlines() if l.startswith("DCGM_")))
p.terminate(); p.wait()
