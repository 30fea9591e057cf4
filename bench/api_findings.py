"""The API's hostile-client findings, rerun against `decider serve` on the demo model (127.0.0.1 only):
a drive-by web page, bad text and Content-Length, a small decision during a 6 MB request, 3,000
slowloris connections, then the console's line and traceback count.

    python -m bench.api_findings
"""
import json, os, socket, subprocess, sys, threading, time, http.client, struct
PORT = 18765


def main() -> None:
    ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from .soak_requests import decider_path

    env = {**os.environ, "PYTHONPATH": decider_path()}  # the server runs the decider this process imports
    proc = subprocess.Popen([sys.executable, "-m", "decider.app.cli", "serve", "--model", os.path.join(ROOT, "resources", "demo-model"),
                             "--device", "CPU", "--port", str(PORT)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close(); break
        except OSError:
            time.sleep(0.1)

    def call(method, path, body=None, headers=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        r = conn.getresponse(); out = r.read(); conn.close(); return r.status, out

    def raw(data):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=10); s.sendall(data)
        out = b""
        try:
            while (x := s.recv(65536)): out += x
        except OSError: pass
        s.close(); return out.split(b"\r\n", 1)[0]

    DEC = {"question": "Scouts report that Retreat is the safe choice. What should we do?", "options": ["Attack", "Retreat", "Trade"]}
    print("2. drive-by page:", call("POST", "/v1/decide", json.dumps(DEC).encode(), {"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": "attacker.example"})[0])
    print("   text/plain, no Origin:", call("POST", "/v1/decide", json.dumps(DEC).encode(), {"Content-Type": "text/plain"})[0])
    print("4. surrogate:", call("POST", "/v1/decide", b'{"question": "\\ud800?", "options": ["a", "b"]}')[0])
    print("   Content-Length: \u00b2:", raw(b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \xc2\xb2\r\n\r\n{}"))
    print("   Expect + bad length:", raw(b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: \xc2\xb2\r\n\r\n"))
    print("   two Content-Lengths:", raw(b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"))
    huge = json.dumps({"messages": [{"role": "user", "content": "word " * 1_200_000}], "max_tokens": 1}).encode()
    res = {}
    t = threading.Thread(target=lambda: res.update(h=call("POST", "/v1/chat/completions", huge)))
    call("POST", "/v1/decide", DEC)
    t.start(); time.sleep(0.05)
    s0 = time.monotonic(); st, _ = call("POST", "/v1/decide", DEC); small = time.monotonic() - s0
    t.join()
    print(f"5. small decide during a {len(huge)/1e6:.1f} MB request: {st} in {small*1000:.0f} ms; the big one: {res['h'][0]}")
    pid = proc.pid
    def threads(): return int([l for l in open(f"/proc/{pid}/status") if l.startswith("Threads:")][0].split()[1])
    socks = []
    for i in range(3000):
        try:
            s = socket.create_connection(("127.0.0.1", PORT), timeout=5); s.send(b"GET /v1/models HTTP/1.1\r\nHo"); socks.append(s)
        except OSError:
            pass
    time.sleep(1)
    print(f"6. 3000 slowloris connections opened ({len(socks)} accepted by the kernel): server threads {threads()}")
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); s.close()
    t0 = time.monotonic()
    codes = []
    while True:
        code = call("GET", "/v1/models", headers={})[0]; codes.append(code)
        if code == 200 or time.monotonic() - t0 > 30: break
        time.sleep(0.1)
    print(f"   after resetting them all: GET /v1/models {code} after {time.monotonic()-t0:.2f} s ({len(codes)} tries)")
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    print("   console lines:", len(err.splitlines()), "tracebacks:", err.count("Traceback"))
    print("\n".join(err.splitlines()[:8]))


if __name__ == "__main__":
    main()
