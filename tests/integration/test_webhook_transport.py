"""The webhooks' transport, for real: a POST pinned to the checked address (plain HTTP and TLS, whose
certificate is checked against the URL's host name, not the address), a FIFO queue's order and
deduplication (moto), and each tenant's secret in Secrets Manager (moto)."""

from __future__ import annotations

import datetime as dt
import http.server
import ssl
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from moto import mock_aws

from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.secrets import SecretsManagerStore
from fusionfleet.adapters.webhook_http import PinnedSender
from fusionfleet.webhooks.addresses import AddressPolicy, WebhookRefused, check_url, resolve
from fusionfleet.webhooks.secrets import TenantSecrets
from fusionfleet.webhooks.signing import WebhookSecret

LOCAL = AddressPolicy(allow_loopback=True, require_https=False)
HOST = "hooks.fusionfleet.test"  # resolves nowhere: only the pinned address reaches the server


class Receiver(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, bytes]] = []
    status = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.seen.append((self.path, self.headers["Host"], body))
        self.send_response(Receiver.status)
        self.end_headers()
        self.wfile.write(b"thanks" if Receiver.status < 300 else b"broken today")

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def server() -> Iterator[http.server.HTTPServer]:
    Receiver.seen, Receiver.status = [], 200
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()


def only_loopback(host: str, port: int) -> Sequence[str]:
    return ["127.0.0.1"]


def test_a_post_goes_to_the_checked_address_with_the_urls_host(server: http.server.HTTPServer) -> None:
    port = server.server_address[1]
    target = resolve(check_url(f"http://{HOST}:{port}/in?x=1", LOCAL), LOCAL, only_loopback)
    answer = PinnedSender().post(target, b'{"a":1}', {"webhook-id": "e1"}, 5.0)
    assert (answer.status, answer.address) == (200, "127.0.0.1")
    assert Receiver.seen == [("/in?x=1", f"{HOST}:{port}", b'{"a":1}')]
    # AND a refusal comes back with the start of the receiver's answer
    Receiver.status = 503
    failed = PinnedSender().post(target, b"{}", {}, 5.0)
    assert failed.status == 503 and failed.error == "broken today"


def test_no_answer_is_told_as_such(tmp_path: Path) -> None:
    target = resolve(check_url("http://127.0.0.1:9/x", LOCAL), LOCAL, only_loopback)  # the discard port: closed
    answer = PinnedSender().post(target, b"{}", {}, 2.0)
    assert answer.status is None and answer.error


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_tls_names_the_urls_host_so_the_certificate_is_checked_against_it(tmp_path: Path) -> None:
    # GIVEN an HTTPS receiver on the loopback whose certificate is for the URL's host name only
    cert, key = _certificate(tmp_path)
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    httpd.socket = serving.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    Receiver.seen, Receiver.status = [], 200
    try:
        port = httpd.server_address[1]
        trusting = ssl.create_default_context(cafile=str(cert))
        policy = AddressPolicy(allow_loopback=True, require_https=True)
        # WHEN the farm posts to https://<host>/ pinned to 127.0.0.1
        target = resolve(check_url(f"https://{HOST}:{port}/hook", policy), policy, only_loopback)
        answer = PinnedSender(trusting).post(target, b"{}", {}, 5.0)
        # THEN TLS verified the certificate against the host name and the request went through
        assert answer.status == 200 and Receiver.seen[0][1] == f"{HOST}:{port}"
        # AND a URL naming the address itself fails verification: the certificate is not for it
        by_address = resolve(check_url(f"https://127.0.0.1:{port}/hook", policy), policy, only_loopback)
        refused = PinnedSender(trusting).post(by_address, b"{}", {}, 5.0)
        assert refused.status is None and "certificate" in refused.error.lower()
    finally:
        httpd.shutdown()


def test_a_private_answer_is_refused_before_any_connection() -> None:
    with pytest.raises(WebhookRefused, match="private"):
        resolve(check_url("https://hooks.example.com/x", AddressPolicy()), AddressPolicy(), lambda h, p: ["10.9.8.7"])


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in (("AWS_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


def test_a_fifo_group_hands_out_one_job_in_order_and_drops_a_duplicate(aws: None) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="w.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    queue = SqsOrderedQueue(sqs)
    for body, dedup in (("a1", "a.r0.started"), ("a2", "a.r0.progress"), ("a2", "a.r0.progress"), ("a3", "a.r0.ok")):
        queue.send_ordered(url, body, group="job-a", dedup=dedup)
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=30)["Messages"]
    assert [m["Body"] for m in first] == ["a1"]
    # while a1 is held (a retry's pause), the job's later events are not handed out
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    rest = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in rest] == ["a2", "a3"]


def test_each_tenant_gets_one_secret_in_secrets_manager(aws: None) -> None:
    client = boto3.client("secretsmanager", region_name="us-east-1")
    secrets = TenantSecrets(SecretsManagerStore(client), "fusionfleet/test/webhooks", cache_s=0)
    acme = secrets.secret_for("acme")
    assert secrets.secret_for("acme") == acme
    stored = client.get_secret_value(SecretId="fusionfleet/test/webhooks/acme")["SecretString"]
    assert WebhookSecret.parse(stored) == acme and stored.startswith("whsec_")
    # a second party that finds it created meanwhile reads that one
    assert not SecretsManagerStore(client).create("fusionfleet/test/webhooks/acme", "whsec_x", "again")
