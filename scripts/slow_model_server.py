# A loopback OpenAI-compatible server that answers chat after DELAY seconds (for the idle-CPU check).
import json, sys, time, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
DELAY = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get('content-length', 0)); body = json.loads(self.rfile.read(n) or b'{}')
        if self.path.endswith('/embeddings'):
            inp = body.get('input', []); inp = [inp] if isinstance(inp, str) else inp
            out = {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [0.1] * 8} for i, _ in enumerate(inp)], "model": "e", "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        else:
            time.sleep(DELAY)
            out = {"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "8"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        b = json.dumps(out).encode(); self.send_response(200); self.send_header('content-type', 'application/json'); self.send_header('content-length', str(len(b))); self.end_headers(); self.wfile.write(b)
ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
