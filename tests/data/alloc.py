import time
time.sleep(0.3)
a = bytearray(50 * 1024 * 1024)  # 50 MiB; one write per page makes every page resident
for i in range(0, len(a), 4096):
    a[i] = 1
time.sleep(0.8)
del a
time.sleep(0.6)
