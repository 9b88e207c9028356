#!/bin/bash
# One-shot of deploy/docker-compose.sasl.yml (runs as root in the apache/kafka image, for
# its keytool): once per pair of volumes, random passwords and a CA plus the broker's
# certificate. Files that exist are kept (to rotate, remove the volumes).
#
#   $BROKER_DIR  (broker only; owner KAFKA_UID, 0700) admin.password, client.password,
#                store.password, broker.p12, truststore.p12, ca.p12, admin.properties
#   $CLIENT_DIR  (the fabric-rca clients; owner CLIENT_UID) client.password (0400),
#                ca.crt (0444)
#
# No password is ever printed, and none is in the compose file.
set -euo pipefail
BROKER_DIR=${BROKER_DIR:-/var/lib/kafka/secrets}
CLIENT_DIR=${CLIENT_DIR:-/run/secrets/kafka}
KAFKA_UID=${KAFKA_UID:-1000}     # apache/kafka's appuser
CLIENT_UID=${CLIENT_UID:-10001}  # the fabric-rca image's user (Dockerfile)
ADMIN_USER=${ADMIN_USER:-admin}
ADVERTISED=${FABRIC_RCA_KAFKA_ADVERTISED_HOST:-127.0.0.1}
KEYTOOL=${KEYTOOL:-$(command -v keytool || echo "${JAVA_HOME:-/opt/java/openjdk}/bin/keytool")}

random() { head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32; }
san() {  # the names clients dial: the compose network's, the host's, the advertised one
  local names="dns:kafka,dns:localhost,ip:127.0.0.1"
  case $ADVERTISED in
    kafka|localhost|127.0.0.1) ;;
    *[!0-9.]*) names="$names,dns:$ADVERTISED" ;;
    *) names="$names,ip:$ADVERTISED" ;;
  esac
  echo "$names"
}

umask 077
mkdir -p "$BROKER_DIR" "$CLIENT_DIR"
for name in admin store client; do
  [ -s "$BROKER_DIR/$name.password" ] || random >"$BROKER_DIR/$name.password"
done
store=$(cat "$BROKER_DIR/store.password")
if [ ! -s "$BROKER_DIR/broker.p12" ] || [ ! -s "$BROKER_DIR/truststore.p12" ] || [ ! -s "$CLIENT_DIR/ca.crt" ]; then
  echo "kafka-secrets: generating a CA and the broker's certificate ($(san))"
  work=$(mktemp -d)
  rm -f "$BROKER_DIR"/ca.p12 "$BROKER_DIR"/broker.p12 "$BROKER_DIR"/truststore.p12
  k() { "$KEYTOOL" "$@" -storetype PKCS12 -storepass "$store" >/dev/null 2>&1; }
  k -genkeypair -alias ca -dname "CN=fabric-rca compose CA" -keyalg RSA -keysize 2048 -validity 3650 \
    -ext bc:c -ext KeyUsage:critical=keyCertSign,cRLSign -keystore "$BROKER_DIR/ca.p12"
  k -exportcert -rfc -alias ca -keystore "$BROKER_DIR/ca.p12" -file "$work/ca.crt"
  k -genkeypair -alias broker -dname "CN=kafka" -keyalg RSA -keysize 2048 -validity 3650 \
    -keystore "$BROKER_DIR/broker.p12"
  k -certreq -alias broker -keystore "$BROKER_DIR/broker.p12" -file "$work/broker.csr"
  k -gencert -rfc -alias ca -keystore "$BROKER_DIR/ca.p12" -infile "$work/broker.csr" -outfile "$work/broker.crt" \
    -validity 3650 -ext "SAN=$(san)" -ext EKU=serverAuth,clientAuth -ext KeyUsage:critical=digitalSignature,keyEncipherment
  k -importcert -noprompt -alias ca -file "$work/ca.crt" -keystore "$BROKER_DIR/broker.p12"
  k -importcert -noprompt -alias broker -file "$work/broker.crt" -keystore "$BROKER_DIR/broker.p12"
  k -importcert -noprompt -alias ca -file "$work/ca.crt" -keystore "$BROKER_DIR/truststore.p12"
  cp "$work/ca.crt" "$CLIENT_DIR/ca.crt"
  rm -rf "$work"
fi
cp "$BROKER_DIR/client.password" "$CLIENT_DIR/client.password"
admin=$(cat "$BROKER_DIR/admin.password")
cat >"$BROKER_DIR/admin.properties" <<PROPS
# the broker's own SCRAM user, for its health check and the ACL one-shot (generated)
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$ADMIN_USER" password="$admin";
ssl.truststore.type=PKCS12
ssl.truststore.location=$BROKER_DIR/truststore.p12
ssl.truststore.password=$store
PROPS
chown -R "$KAFKA_UID:$KAFKA_UID" "$BROKER_DIR"
chmod 700 "$BROKER_DIR"
chmod 600 "$BROKER_DIR"/*
chown -R "$CLIENT_UID:$CLIENT_UID" "$CLIENT_DIR"
chmod 755 "$CLIENT_DIR"
chmod 400 "$CLIENT_DIR/client.password"
chmod 444 "$CLIENT_DIR/ca.crt"
echo "kafka-secrets: ready (broker: $BROKER_DIR, clients: $CLIENT_DIR)"
