"""Generation through a serving engine (`--server URL`: vLLM or any OpenAI-compatible server): the client
(`client.py`) and the engine's runner on it (`runner.py`). Imports no torch; httpx only when used."""

from reachtui.serving.client import ServerOptions
from reachtui.serving.runner import ServerRunner, connect, layers_refused

__all__ = ["ServerOptions", "ServerRunner", "connect", "layers_refused"]
