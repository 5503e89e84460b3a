"""An operator console client for tests: the HTTP calls the page makes, the control key it keeps."""
import json
import urllib.error
import urllib.request


class ConsoleClient:
    """Acts on the console at ``url`` with ``token``; keeps the control key the server issues
    (the answer that made this client the holder carries it) and sends it back, as the page does."""

    def __init__(self, url: str, token: str | None, name: str = "tester"):
        self.url, self.token, self.name = url, token, name
        self.control = ""

    def act(self, action: str, body=None, timeout: float = 30.0) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
        headers = {"Content-Type": "application/json", "X-MotorMind-Name": self.name}
        if self.token:
            headers["X-MotorMind-Token"] = self.token
        if self.control:
            headers["X-MotorMind-Control"] = self.control
        req = urllib.request.Request(self.url + f"api/action/{action}", data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                code, out = r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            code, out = e.code, json.loads(e.read())
        if out.get("control"):
            self.control = out["control"]
        return code, out

    def state(self, timeout: float = 10.0) -> dict:
        with urllib.request.urlopen(self.url + "api/state", timeout=timeout) as r:
            return json.loads(r.read())
