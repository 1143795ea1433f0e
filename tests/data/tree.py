import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time\nb = bytearray(40*1024*1024)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(1.2)"])
a = bytearray(30 * 1024 * 1024)
for i in range(0, len(a), 4096):
    a[i] = 1
time.sleep(1.5)
child.wait()
