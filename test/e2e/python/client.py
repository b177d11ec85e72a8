"""The Python `kubernetes` client (Debian's python3-kubernetes) against one server URL, for
test/e2e/client-libraries.test.ts: an exec over WebSocket v4 (stdin, stdout, stderr, the exit code
on the error channel) and a port-forward over WebSocket v4 (`portforward.k8s.io`), printed as one
JSON line. Usage: client.py URL BYTES_PORT PF_BYTES SEED
"""
import hashlib
import json
import sys

from kubernetes import client
from kubernetes.stream import portforward, stream

url, bytes_port, pf_bytes, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
configuration = client.Configuration()
configuration.host = url
api = client.CoreV1Api(client.ApiClient(configuration))

# exec: 100,000 bytes of stdin read by `head -c`, their sha256 back on stdout, a line on stderr, exit 3.
STDIN = ''.join(chr(97 + (i * 7) % 26) for i in range(100_000))
ws = stream(api.connect_get_namespaced_pod_exec, 'demo', 'default',
            command=['sh', '-c', 'head -c 100000 | sha256sum; echo err >&2; exit 3'],
            stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False)
for i in range(0, len(STDIN), 16_384):
    ws.write_stdin(STDIN[i:i + 16_384])
ws.run_forever(timeout=60)
exec_result = {
    'stdout': ws.read_stdout(timeout=0) if ws.peek_stdout() else '',
    'stderr': ws.read_stderr(timeout=0) if ws.peek_stderr() else '',
    'code': ws.returncode,
    'stdinSha256': hashlib.sha256(STDIN.encode('ascii')).hexdigest(),
}

# port-forward: one HTTP/1.0 download through the pod's port.
pf = portforward(api.connect_get_namespaced_pod_portforward, 'demo', 'default', ports=str(bytes_port))
sock = pf.socket(bytes_port)
sock.setblocking(True)
sock.sendall(f'GET /bytes/{pf_bytes}?seed={seed} HTTP/1.0\r\nHost: pod\r\n\r\n'.encode('ascii'))
received = b''
while True:
    chunk = sock.recv(65_536)
    if not chunk:
        break
    received += chunk
sock.close()
head, _, body = received.partition(b'\r\n\r\n')
pf_result = {'status': head.split(b'\r\n')[0].decode('latin1'), 'sha256': hashlib.sha256(body).hexdigest(), 'byteLength': len(body)}
print(json.dumps({'exec': exec_result, 'portForward': pf_result}))
