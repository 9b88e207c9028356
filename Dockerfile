# fabric-rca: one image for every role (worker, serve, topics, replay); the compose
# file picks the role with the command. Build: docker build -t fabric-rca:0.1.0 .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A fixed numeric uid/gid, so runAsNonRoot policies and volume ownership are predictable.
RUN groupadd --system --gid 10001 fabric \
 && useradd --system --uid 10001 --gid fabric --home-dir /var/lib/fabric-rca \
        --shell /usr/sbin/nologin fabric

WORKDIR /src
# pyproject names README.md as the package readme: the build needs it.
COPY pyproject.toml README.md ./
COPY contract ./contract
COPY compose ./compose
COPY engine ./engine
COPY rules ./rules
COPY models ./models
COPY api ./api
COPY sim ./sim
COPY evaluation ./evaluation
COPY cli ./cli
COPY streams ./streams
COPY notify ./notify
RUN pip install '.[postgres]' \
 && cd / && rm -rf /src

# The demo fabric's topology (same arguments, same bytes: it equals the topology.dot the
# demo replay generates), so a worker can be started on it before the demo runs:
# FABRIC_RCA_TOPOLOGY=/usr/share/fabric-rca/demo/topology.dot (docs/deploy.md).
RUN fabric-rca simulate --out /tmp/demo --scenario demo --seed 1 > /dev/null \
 && install -D -m 0644 /tmp/demo/topology.dot /usr/share/fabric-rca/demo/topology.dot \
 && rm -rf /tmp/demo

# Working directory for faust's local state and replay's rejects file; demo/ is created
# here so a named volume mounted on it starts owned by the fabric user.
RUN mkdir -p /var/lib/fabric-rca/demo /etc/fabric-rca \
 && chown -R fabric:fabric /var/lib/fabric-rca
WORKDIR /var/lib/fabric-rca
USER 10001:10001

# 8000: HTTP API (serve); 9108: worker health and Prometheus metrics.
EXPOSE 8000 9108

ENTRYPOINT ["fabric-rca"]
CMD ["--help"]
