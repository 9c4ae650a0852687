# A codemode worker: the workflow, the sandbox steps and the tools of examples/tools.py.
# Built by docker-compose.yml, which also runs the Temporal dev server it connects to.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY runtimes ./runtimes
COPY activities ./activities
COPY workflows ./workflows
COPY worker ./worker
COPY examples ./examples
RUN pip install --no-cache-dir .

ENV TEMPORAL_ADDRESS=temporal:7233
CMD ["codemode", "worker", "--tools", "examples.tools"]
