"""How the Kafka clients authenticate and encrypt: one settings value for every library.

`KafkaSecurity` comes from flags, FABRIC_RCA_KAFKA_* variables and files (`from_sources`;
the password only from a file or the environment, never a flag: flags show in `ps`),
and gives each client library its arguments: kafka-python (`kafka_python()`), aiokafka
(`aiokafka()`) and faust (`faust()`, the app's `broker_credentials`). The password never
shows in `repr`, logs or summaries (`***`).
"""
from __future__ import annotations

import argparse
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
DEFAULT_MECHANISM = "SCRAM-SHA-512"
MASK = "***"

ENV_PROTOCOL = "FABRIC_RCA_KAFKA_SECURITY_PROTOCOL"
ENV_MECHANISM = "FABRIC_RCA_KAFKA_SASL_MECHANISM"
ENV_USERNAME = "FABRIC_RCA_KAFKA_USERNAME"
ENV_PASSWORD = "FABRIC_RCA_KAFKA_PASSWORD"
ENV_PASSWORD_FILE = "FABRIC_RCA_KAFKA_PASSWORD_FILE"
ENV_CA_FILE = "FABRIC_RCA_KAFKA_CA_FILE"


class KafkaSecurityError(ValueError):
    """The Kafka security settings are incomplete or contradict each other; says which."""


@dataclass(frozen=True)
class KafkaSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None  # SASL only
    username: str | None = None
    password: str | None = field(default=None, repr=False, compare=False)
    ca_file: Path | None = None  # TLS: the CA that signed the broker's certificate (None: the system's)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise KafkaSecurityError(f"Kafka security protocol {self.protocol!r}: expected one of {', '.join(PROTOCOLS)}")
        if self.sasl:
            if self.mechanism not in MECHANISMS:
                raise KafkaSecurityError(f"SASL mechanism {self.mechanism!r}: expected one of {', '.join(MECHANISMS)}")
            if not self.username:
                raise KafkaSecurityError(f"{self.protocol} needs a user name (--kafka-username or {ENV_USERNAME})")
            if not self.password:
                raise KafkaSecurityError(f"{self.protocol} needs a password (--kafka-password-file, "
                                         f"{ENV_PASSWORD_FILE} or {ENV_PASSWORD})")
        elif self.mechanism or self.username or self.password:
            raise KafkaSecurityError(f"a SASL user name, password or mechanism was given but the protocol is "
                                     f"{self.protocol}: set {ENV_PROTOCOL} (or --kafka-security-protocol) to SASL_SSL")
        if self.ca_file is not None:
            if not self.tls:
                raise KafkaSecurityError(f"a CA file was given but the protocol is {self.protocol}, without TLS")
            if not Path(self.ca_file).is_file():
                raise KafkaSecurityError(f"Kafka CA file {self.ca_file} does not exist")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def __repr__(self) -> str:
        return f"KafkaSecurity({self.describe()})"

    def describe(self) -> str:
        """One line for logs and summaries: protocol, mechanism, user, CA; the password masked."""
        parts = [self.protocol]
        if self.sasl:
            parts += [str(self.mechanism), f"user={self.username}", f"password={MASK}"]
        if self.tls:
            parts.append(f"ca={self.ca_file or 'system'}")
        return " ".join(parts)

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context that checks the broker's certificate and host name."""
        if not self.tls:
            return None
        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)

    def kafka_python(self) -> dict:
        """Keyword arguments of kafka-python's KafkaProducer, KafkaConsumer and KafkaAdminClient."""
        kw: dict = {"security_protocol": self.protocol}
        if self.sasl:
            kw |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                   "sasl_plain_password": self.password}
        if self.tls:
            kw |= {"ssl_check_hostname": True, **({"ssl_cafile": str(self.ca_file)} if self.ca_file else {})}
        return kw

    def aiokafka(self) -> dict:
        """Keyword arguments of aiokafka's clients (AIOKafkaConsumer, AIOKafkaProducer)."""
        kw: dict = {"security_protocol": self.protocol}
        if self.sasl:
            kw |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                   "sasl_plain_password": self.password}
        if self.tls:
            kw["ssl_context"] = self.ssl_context()
        return kw

    def faust(self) -> dict:
        """Settings of `faust.App` (its consumer, producer and topic admin): `broker_credentials`."""
        import faust

        if self.sasl:  # with a TLS context faust speaks SASL_SSL, without SASL_PLAINTEXT
            return {"broker_credentials": faust.SASLCredentials(
                username=self.username, password=self.password, mechanism=self.mechanism,
                ssl_context=self.ssl_context())}
        if self.tls:
            return {"broker_credentials": faust.SSLCredentials(self.ssl_context())}
        return {}


PLAINTEXT = KafkaSecurity()


def read_password_file(path: str | Path) -> str:
    """The first line of `path` (a trailing newline is not part of the password)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise KafkaSecurityError(f"cannot read the Kafka password file {p}: {exc.strerror or exc}") from exc
    password = text.splitlines()[0] if text.strip() else ""
    if not password:
        raise KafkaSecurityError(f"the Kafka password file {p} is empty")
    return password


def from_sources(*, protocol: str | None = None, mechanism: str | None = None, username: str | None = None,
                 password_file: str | Path | None = None, ca_file: str | Path | None = None,
                 env: Mapping[str, str] = os.environ) -> KafkaSecurity:
    """Flags first, then the FABRIC_RCA_KAFKA_* variables; PLAINTEXT when nothing is set.
    The password: --kafka-password-file, else FABRIC_RCA_KAFKA_PASSWORD_FILE, else
    FABRIC_RCA_KAFKA_PASSWORD."""
    protocol = (protocol or env.get(ENV_PROTOCOL) or "PLAINTEXT").strip().upper()
    mechanism = (mechanism or env.get(ENV_MECHANISM) or "").strip().upper() or None
    username = username or env.get(ENV_USERNAME) or None
    password_file = password_file or env.get(ENV_PASSWORD_FILE) or None
    password = read_password_file(password_file) if password_file else (env.get(ENV_PASSWORD) or None)
    ca = ca_file or env.get(ENV_CA_FILE) or None
    if protocol.startswith("SASL_") and mechanism is None:
        mechanism = DEFAULT_MECHANISM
    return KafkaSecurity(protocol=protocol, mechanism=mechanism, username=username, password=password,
                         ca_file=Path(ca) if ca else None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The --kafka-* flags of a command that talks to Kafka (each falls back to its variable)."""
    g = parser.add_argument_group("Kafka security (default PLAINTEXT; see docs/deploy.md, Secure Kafka)")
    g.add_argument("--kafka-security-protocol", choices=PROTOCOLS, type=str.upper, metavar="PROTOCOL",
                   help=f"{', '.join(PROTOCOLS)} (or {ENV_PROTOCOL})")
    g.add_argument("--kafka-sasl-mechanism", choices=MECHANISMS, type=str.upper, metavar="MECHANISM",
                   help=f"{', '.join(MECHANISMS)} (or {ENV_MECHANISM}; default {DEFAULT_MECHANISM})")
    g.add_argument("--kafka-username", metavar="USER", help=f"SASL user (or {ENV_USERNAME})")
    g.add_argument("--kafka-password-file", type=Path, metavar="FILE",
                   help=f"file holding the SASL password (or {ENV_PASSWORD_FILE}, or the password in {ENV_PASSWORD})")
    g.add_argument("--kafka-ca-file", type=Path, metavar="PEM",
                   help=f"CA certificate the broker's TLS certificate is checked with (or {ENV_CA_FILE}; "
                        "default: the system's CAs)")


def from_args(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> KafkaSecurity:
    """The settings of a command given `add_arguments`' flags."""
    return from_sources(protocol=getattr(args, "kafka_security_protocol", None),
                        mechanism=getattr(args, "kafka_sasl_mechanism", None),
                        username=getattr(args, "kafka_username", None),
                        password_file=getattr(args, "kafka_password_file", None),
                        ca_file=getattr(args, "kafka_ca_file", None), env=env)
