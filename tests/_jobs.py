"""Shared helpers of the tests: generated jobs, the log inputs of the fixtures and the shared corpus,
an S3 store on loopback."""
from __future__ import annotations

import gzip
import importlib.util
import os
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generator():  # type: ignore[no-untyped-def]
    name = "ncclsleuth_bench_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


CORPUS = ROOT.parent / "shared" / "corpus"


def log_inputs() -> list[Path]:
    """Every log of the fixtures, and of the shared corpus where it is beside the checkout."""
    out = sorted(p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".out"))
    if CORPUS.is_dir():
        out += sorted(CORPUS.glob("cases/*/log.txt")) + sorted(CORPUS.glob("healthy/*/log.txt"))
    return out


def layout_job(root: Path, layout: str, ranks: int = 48, comms: int = 3, channels: int = 8, noise: int = 30) -> Path:
    """A generated desync job under ``root/layout``: one file with every rank, or per-rank files."""
    gen = generator()
    out = root / layout
    args = gen.build_parser().parse_args(["--ranks", str(ranks), "--per-host", "8", "--comms", str(comms),
                                          "--channels", str(channels), "--inject", "desync", "--layout", layout,
                                          "--noise-per-rank", str(noise), "--out", str(out)])
    gen.generate(args)
    return out


def make_job(root: Path, ranks: int = 96, inject: str = "desync", seed: int = 7, gzip_every: int = 3,
             noise: int = 40) -> tuple[Path, dict]:
    """A per-rank-file job under ``root/job``; every ``gzip_every``-th file gzipped (name kept)."""
    gen = generator()
    out = root / "job"
    args = gen.build_parser().parse_args(["--ranks", str(ranks), "--per-host", "8", "--channels", "4",
                                          "--inject", inject, "--seed", str(seed), "--noise-per-rank",
                                          str(noise), "--out", str(out)])
    manifest = gen.generate(args)
    if gzip_every:
        for i, p in enumerate(sorted(out.iterdir())):
            if i % gzip_every == 0:
                p.write_bytes(gzip.compress(p.read_bytes(), mtime=0))
    return out, manifest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Store:
    """moto's S3 server on 127.0.0.1 with credentials and endpoint in the environment."""

    ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_SESSION_TOKEN": "testing"}

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> S3Store:
        self.server.start()
        env = dict(self.ENV, FSSPEC_S3_ENDPOINT_URL=self.endpoint)
        for k, v in env.items():
            self._saved[k] = os.environ.get(k)
            os.environ[k] = v
        return self

    def __exit__(self, *exc: object) -> None:
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.server.stop()

    def upload(self, folder: Path, bucket: str, prefix: str) -> str:
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=self.endpoint, skip_instance_cache=True)
        if not fs.exists(bucket):
            fs.mkdir(bucket)
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                fs.pipe(f"{bucket}/{prefix}/{p.relative_to(folder).as_posix()}", p.read_bytes())
        return f"s3://{bucket}/{prefix}"
