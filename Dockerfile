# One image for the worker, the simulator and the CLI.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY workflows ./workflows
COPY activities ./activities
COPY resilience ./resilience
COPY providers ./providers
COPY stores ./stores
COPY sim ./sim
COPY telemetry ./telemetry
COPY cli ./cli
COPY config ./config
COPY worker.py ./
RUN pip install --no-cache-dir . opentelemetry-exporter-otlp
ENV PYTHONUNBUFFERED=1
CMD ["python", "worker.py"]
