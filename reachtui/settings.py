"""The commands' options as typed values, from the command line to the engine and the model.

Each class is a group of click options that several commands share, declared once in
`reachtui.commands.options`, whose decorators build it from the option values by name: a command takes one
`ProtocolOptions`, `Deployment`, `Placement`, `ModelAccess` or `ServerFlags` argument where it took their
options one by one. Frozen and checked by mypy (tests/test_types.py): a renamed option is a type error, not
a KeyError at run time, and a value can be followed by name from the option to where it is used
(`--temperature`: `ProtocolOptions.temperature` -> the protocol's sample probe -> `generation.Decoding`
-> the sampler). Pure data: the checks that turn these into a protocol, a task or a server's options are
`reachtui.commands.preflight` and `reachtui.commands.serving`. Nothing here imports beyond the standard
library, so the app and the model room can name these types too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deployment:
    """The protocol's deployment fields as flags (None, empty: keep the protocol's): --chat/--no-chat,
    --system, --template, --answer-format, --stop (repeatable, `\\n` a newline), --fewshot FILE.jsonl."""

    chat: bool | None = None
    system: str | None = None
    template: str | None = None
    answer_format: str | None = None
    stops: tuple[str, ...] = ()
    fewshot_file: str | None = None

    def given(self) -> list[str]:
        """The flags given, as the user writes them, in --help's order."""
        return [flag for flag, value in (("--chat", self.chat), ("--system", self.system),
                                         ("--template", self.template), ("--answer-format", self.answer_format),
                                         ("--stop", self.stops or None), ("--fewshot", self.fewshot_file))
                if value is not None]


@dataclass(frozen=True)
class ProtocolOptions:
    """What an audit's protocol is made of: the protocol file or preset (`file`, --protocol; None: the default
    protocol) and the flags applied on top of it (None: keep the file's): --probes, --budget/-k,
    --temperature (the sample probe's), --seed, --max-new-tokens, the deployment flags."""

    file: str | None = None
    probes: str | None = None
    budget: int | None = None
    temperature: float | None = None
    seed: int | None = None
    max_new_tokens: int | None = None
    deployment: Deployment = Deployment()


@dataclass(frozen=True)
class Placement:
    """Where the model runs in this process: --device, --dtype, --device-map MAP, --offload-folder DIR."""

    device: str = "auto"
    dtype: str = "auto"
    device_map: str | None = None
    offload_folder: str | None = None

    def given(self) -> list[str]:
        """The placement flags set to something other than their default, in --help's order."""
        return [flag for flag, given in (("--device", self.device != "auto"), ("--dtype", self.dtype != "auto"),
                                         ("--device-map", self.device_map is not None),
                                         ("--offload-folder", self.offload_folder is not None)) if given]


@dataclass(frozen=True)
class ModelAccess:
    """What may be loaded, and from where: --revision REV (of a Hugging Face id), --trust-remote-code,
    --allow-download, --allow-pickle, --allow-missing-weights."""

    revision: str | None = None
    trust_remote_code: bool = False
    allow_download: bool = False
    allow_pickle: bool = False
    allow_missing_weights: bool = False


@dataclass(frozen=True)
class ServerFlags:
    """--server URL and the options that go with it, as given (unchecked; None: not given):
    `reachtui.commands.serving.server_of` checks them into a `reachtui.serving.ServerOptions`."""

    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = None
    request_timeout: float | None = None

    def given(self) -> list[str]:
        """The options besides --server that were given, as the user writes them, in --help's order."""
        return [flag for flag, value in (("--server-model", self.model), ("--api-key-env", self.api_key_env),
                                         ("--concurrency", self.concurrency),
                                         ("--request-timeout", self.request_timeout)) if value is not None]
