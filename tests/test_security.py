"""streams.security: where Kafka credentials come from, what each client library gets,
and that the password never shows."""
import argparse

import pytest

from streams import security
from streams.security import KafkaSecurity, KafkaSecurityError


@pytest.fixture
def secret_files(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret-pass\n")
    ca = tmp_path / "ca.crt"
    ca.write_text("not parsed here")
    return pw, ca


def test_nothing_set_is_plaintext():
    sec = security.from_sources(env={})
    assert sec == security.PLAINTEXT
    assert sec.kafka_python() == {"security_protocol": "PLAINTEXT"}
    assert sec.faust() == {}


def test_environment_with_a_password_file(secret_files):
    pw, ca = secret_files
    sec = security.from_sources(env={"FABRIC_RCA_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
                                     "FABRIC_RCA_KAFKA_USERNAME": "fabric-rca",
                                     "FABRIC_RCA_KAFKA_PASSWORD_FILE": str(pw), "FABRIC_RCA_KAFKA_CA_FILE": str(ca)})
    assert sec.kafka_python() == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                  "sasl_plain_username": "fabric-rca", "sasl_plain_password": "s3cret-pass",
                                  "ssl_check_hostname": True, "ssl_cafile": str(ca)}


def test_flags_win_over_the_environment(secret_files):
    pw, _ = secret_files
    p = argparse.ArgumentParser()
    security.add_arguments(p)
    args = p.parse_args(["--kafka-security-protocol", "sasl_plaintext", "--kafka-sasl-mechanism", "SCRAM-SHA-256",
                         "--kafka-username", "flag-user", "--kafka-password-file", str(pw)])
    sec = security.from_args(args, env={"FABRIC_RCA_KAFKA_USERNAME": "env-user", "FABRIC_RCA_KAFKA_PASSWORD": "envpw"})
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == \
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "flag-user", "s3cret-pass")


def test_the_password_is_masked_everywhere_it_could_show():
    sec = KafkaSecurity(protocol="SASL_SSL", mechanism="SCRAM-SHA-512", username="u", password="hunter2")
    for text in (repr(sec), str(sec), sec.describe(), repr(sec.faust()["broker_credentials"])):
        assert "hunter2" not in text
    assert "password=***" in sec.describe()


def test_faust_gets_sasl_credentials_with_a_tls_context():
    import faust

    creds = KafkaSecurity(protocol="SASL_SSL", mechanism="SCRAM-SHA-256", username="u", password="p").faust()
    c = creds["broker_credentials"]
    assert isinstance(c, faust.SASLCredentials)
    assert (c.protocol.value, c.mechanism.value, c.username) == ("SASL_SSL", "SCRAM-SHA-256", "u")
    assert c.ssl_context is not None and c.ssl_context.check_hostname


@pytest.mark.parametrize("kw, reason", [
    (dict(protocol="SASL_SSL", username="u"), "needs a password"),
    (dict(protocol="SASL_SSL", password="p"), "needs a user name"),
    (dict(protocol="PLAINTEXT", username="u", password="p"), "the protocol is PLAINTEXT"),
    (dict(protocol="TLS"), "expected one of"),
    (dict(protocol="SASL_SSL", mechanism="MD5", username="u", password="p"), "SASL mechanism 'MD5'"),
    (dict(protocol="SSL", ca_file="/nonexistent/ca.crt"), "does not exist"),
])
def test_incomplete_settings_say_what_is_missing(kw, reason):
    kw.setdefault("mechanism", "SCRAM-SHA-512" if kw["protocol"].startswith("SASL") else None)
    with pytest.raises(KafkaSecurityError, match=reason):
        KafkaSecurity(**kw)


def test_an_empty_or_missing_password_file_is_refused(tmp_path):
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(KafkaSecurityError, match="is empty"):
        security.read_password_file(tmp_path / "empty")
    with pytest.raises(KafkaSecurityError, match="cannot read"):
        security.read_password_file(tmp_path / "missing")
