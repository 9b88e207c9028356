#!/bin/bash
# One-shot of deploy/docker-compose.sasl.yml, once the broker is healthy: the clients'
# SCRAM user may use every topic, group and transactional id and create topics (as
# scripts/kafka-dev grants); anyone else, and anyone without credentials, nothing.
# Idempotent: run at every `up`.
set -euo pipefail
KAFKA_HOME=${KAFKA_HOME:-/opt/kafka}
CONFIG=${BROKER_DIR:-/var/lib/kafka/secrets}/admin.properties
BOOTSTRAP=${BOOTSTRAP:-kafka:9092}
PRINCIPAL=User:${FABRIC_RCA_KAFKA_USERNAME:-fabric-rca}
acls() { "$KAFKA_HOME/bin/kafka-acls.sh" --bootstrap-server "$BOOTSTRAP" --command-config "$CONFIG" --add \
           --allow-principal "$PRINCIPAL" "$@" >/dev/null; }
acls --operation All --topic '*' --group '*' --transactional-id '*'
acls --operation Create --operation Describe --operation IdempotentWrite --cluster
echo "kafka-acls: $PRINCIPAL may use every topic and group and create topics"
