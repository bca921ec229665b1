"""What the Ray backend checks before any run exists: tracking store, cluster address, what a cell asks for."""

from __future__ import annotations

import socket
from urllib.parse import urlparse

from ....contract import CPU_FAMILY, CUDA_FAMILY, GAUDI_FAMILY
from ....environment import ray_address
from ....errors import ConfigError

HOST_RESOURCE = "bridgetower_host"  # optional, one per node (`ray start --resources`): a cell holds its node alone
REMOTE_TRACKING_SCHEMES = ("http", "https", "databricks")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
PROBE_SECONDS = 5.0
ADDRESS_FORMS = "allowed: auto, host:port of a Ray head (its GCS port, 6379 by default), or ray://host:port"
# Ray's names for what a cell trains on, per accelerator family (accelerators.registry.family)
FAMILY_RESOURCE = {CPU_FAMILY: "CPU", CUDA_FAMILY: "GPU", GAUDI_FAMILY: "HPU"}


def check_tracking_uri(uri: str) -> None:
    """Every node writes to the store itself: a file or sqlite store on the driver cannot be shared."""
    if urlparse(uri).scheme.lower() not in REMOTE_TRACKING_SCHEMES:
        raise ConfigError("tracking_uri", uri, "allowed with --backend ray: an http(s) tracking server every "
                                               "node can reach, e.g. `mlflow server --host 0.0.0.0 --port 5000` "
                                               "and MLFLOW_TRACKING_URI=http://<that host>:5000")


def check_tracking_reach(uri: str, node_addresses: set[str]) -> None:
    """A loopback tracking URI works only when every node is this machine."""
    host = (urlparse(uri).hostname or "").lower()
    loopback = host in LOOPBACK_HOSTS or host.startswith("127.")
    if loopback and len(node_addresses) > 1:
        raise ConfigError("tracking_uri", uri, f"allowed with --backend ray: an address every node can reach; "
                                               f"{host} is loopback and the cluster spans {sorted(node_addresses)}")


def parse_ray_address(text: str) -> tuple[str, tuple[str, int] | None]:
    """(what ray.init gets, (host, port) to probe first, or None where Ray finds the cluster itself)."""
    value = str(text or "").strip() or "auto"
    if value == "auto":
        value = ray_address() or "auto"  # what ray.init("auto") would use
        if value == "auto":
            return value, None
    rest = value[len("ray://"):] if value.startswith("ray://") else value
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or "/" in rest:
        raise ConfigError("ray_address", text, ADDRESS_FORMS)
    return value, (host.strip("[]"), int(port))


def probe(address: str, endpoint: tuple[str, int]) -> None:
    """ray.init retries an unreachable address for ever: fail in seconds instead."""
    try:
        socket.create_connection(endpoint, timeout=PROBE_SECONDS).close()
    except OSError as exc:
        raise ConfigError("ray_address", address, f"allowed: the address of a running Ray cluster; nothing "
                                                  f"answers at {endpoint[0]}:{endpoint[1]} ({exc.strerror or exc})"
                          ) from None


def cell_request(accel_family: str, devices: int) -> dict[str, float]:
    """The Ray resources one cell's task holds: its accelerators (CPUs on CPU)."""
    return {FAMILY_RESOURCE[accel_family]: float(devices)}


def task_options(request: dict[str, float], name: str, strategy: object = "SPREAD") -> dict:
    """ray.remote options for a cell: no retries (a retried benchmark cell would log twice)."""
    custom = {key: value for key, value in request.items() if key not in ("CPU", "GPU")}
    if "HPU" in custom:
        custom["HPU"] = int(custom["HPU"])  # Ray accepts only whole HPUs
    return {"num_cpus": request.get("CPU", 0), "num_gpus": request.get("GPU", 0), "resources": custom,
            "max_retries": 0, "retry_exceptions": False, "scheduling_strategy": strategy, "name": name}


def check_feasible(request: dict[str, float], nodes: list[dict], address: str) -> None:
    """Ray leaves a request no node can meet pending for ever: refuse it while nothing has started."""
    if any(node.get("Alive", True) and all(node["Resources"].get(key, 0) >= value for key, value in request.items())
           for node in nodes):
        return
    offered = "; ".join(
        f"{node['NodeID'][:12]}: " + (", ".join(f"{key} {value:g}" for key, value in sorted(node["Resources"].items())
                                                if key in ("CPU", "GPU", "HPU", HOST_RESOURCE)) or "nothing")
        for node in nodes) or "no alive node"
    wanted = ", ".join(f"{key} {value:g}" for key, value in request.items())
    raise ConfigError("ray_address", address, f"allowed: a Ray cluster with a node that has {wanted} (nodes "
                                              f"here: {offered})")
