"""The tenant page as a site: its files and policy, CORS on the local gateway and in the template, the
CloudFront distribution that serves it on AWS, and `fusionfleet dashboard publish`."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from fleetctl.dashboard import DashboardServer
from fleetctl.dashboard.publish import NoDashboard, site_for, upload
from fleetctl.dashboard.site import CONFIG_KEY, content_policy, origin, tenant_site
from fleetctl.local.supervisor import tenant_page_url
from infra.emulators import cors
from infra.emulators.api_gateway import LocalApi
from infra.emulators.cors import CorsPolicy
from infra.emulators.jwt_authorizer import JwtAuthorizer
from tests.support.cfn import PSEUDO_PARAMETERS, Conditions, existing, parameter_values, references, source, transform
from tests.support.dashboard import FakeDashboardSource

PAGE = "https://d111111abcdef8.cloudfront.net"
API = "https://abc123.execute-api.eu-west-1.amazonaws.com/"
OUTPUTS = {
    "DashboardBucketName": "fleet-dashboardbucket-1",
    "DashboardUrl": f"{PAGE}/",
    "ApiUrl": API,
    "ApiJwtIssuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_x",
    "ApiJwtAudience": "client-1",
    "ApiTenantClaim": "custom:tenant",
}


# ---------------------------------------------------------------- CORS, as API Gateway applies it


def test_a_preflight_from_the_page_is_answered_with_its_origin_echoed() -> None:
    policy = CorsPolicy(frozenset({PAGE}))
    asked = {"Origin": PAGE, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type"}  # fmt: skip
    headers = dict(policy.preflight(asked))
    assert headers["Access-Control-Allow-Origin"] == PAGE
    assert headers["Access-Control-Allow-Methods"] == "GET,POST"
    assert headers["Access-Control-Allow-Headers"] == "authorization,content-type"


@pytest.mark.parametrize(
    "asked",
    [
        {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
        {"Origin": PAGE, "Access-Control-Request-Method": "DELETE"},
        {"Origin": PAGE, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "x-api-key"},
        {"Origin": "null", "Access-Control-Request-Method": "GET"},
    ],
)
def test_a_preflight_for_another_origin_method_or_header_gets_no_cors_headers(asked: dict[str, str]) -> None:
    headers = dict(CorsPolicy(frozenset({PAGE})).preflight(asked))
    assert not any(name.startswith("Access-Control-") for name in headers), headers


def test_responses_echo_an_allowed_origin_only() -> None:
    policy = CorsPolicy(frozenset({PAGE}))
    assert dict(policy.response({"origin": PAGE}))["Access-Control-Allow-Origin"] == PAGE
    assert "Access-Control-Allow-Origin" not in dict(policy.response({"Origin": "https://evil.example"}))
    assert policy.response({}) == ()


def _gateway(allowed: str) -> LocalApi:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    public = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def handler(_event: dict[str, Any], _context: Any) -> dict[str, Any]:
        raise AssertionError("no request here carries a valid token")

    return LocalApi(JwtAuthorizer(pem, "https://issuer/", "aud"), handler, cors=CorsPolicy(frozenset({allowed})))


def test_the_local_gateway_answers_a_preflight_before_the_token_check() -> None:
    # GIVEN the local gateway allowing the page's origin WHEN the browser asks before a GET /jobs
    answer = _gateway(PAGE).respond(
        "OPTIONS", "/jobs", {"Origin": PAGE, "Access-Control-Request-Method": "GET",
                             "Access-Control-Request-Headers": "authorization"}, b"",
    )  # fmt: skip
    # THEN it answers 204 with the CORS headers, without asking for a token (preflights carry none)
    assert answer.status == 204
    assert dict(answer.headers)["Access-Control-Allow-Origin"] == PAGE


def test_the_local_gateway_echoes_the_pages_origin_on_a_refusal_too_and_no_other() -> None:
    # A 401 the page can read (so it can ask for a new token), and none another site's script can.
    mine = _gateway(PAGE).respond("GET", "/jobs", {"Origin": PAGE}, b"")
    theirs = _gateway(PAGE).respond("GET", "/jobs", {"Origin": "https://evil.example"}, b"")
    assert (mine.status, theirs.status) == (401, 401)
    assert dict(mine.headers)["Access-Control-Allow-Origin"] == PAGE
    assert "Access-Control-Allow-Origin" not in dict(theirs.headers)


# ---------------------------------------------------------------- the site's files


def test_the_published_site_has_each_file_with_its_type_and_the_apis_exact_origin_in_the_page() -> None:
    files = {item.key: item for item in tenant_site(API, "https://issuer/", "aud", "tenant")}
    assert {key: item.content_type.split(";")[0] for key, item in files.items()} == {
        "index.html": "text/html", "static/render.js": "text/javascript", "static/tenant.js": "text/javascript",
        "static/preview.js": "text/javascript",        "static/style.css": "text/css", CONFIG_KEY: "application/json",
    }  # fmt: skip
    page = files["index.html"].body.decode()
    assert f"connect-src 'self' {origin(API)};" in page and "frame-ancestors" in page
    # AND with the media bucket named, the page may also send a new job's files there, and nowhere else
    (with_uploads,) = [f.body.decode() for f in tenant_site(API, media_bucket="media-b") if f.key == "index.html"]
    uploads = "https://media-b.s3.eu-west-1.amazonaws.com https://media-b.s3.amazonaws.com"
    assert f"connect-src 'self' {origin(API)} {uploads};" in with_uploads
    assert files["index.html"].cache_control == "no-cache"
    assert json.loads(files[CONFIG_KEY].body) == {
        "api_url": API.rstrip("/"), "issuer": "https://issuer/", "audience": "aud", "tenant_claim": "tenant",
    }  # fmt: skip


def test_publish_reads_the_stacks_outputs_and_uploads_with_content_types() -> None:
    class S3:
        def __init__(self) -> None:
            self.puts: list[dict[str, Any]] = []

        def put_object(self, **kwargs: Any) -> None:
            self.puts.append(kwargs)

    bucket, files = site_for(OUTPUTS)
    s3 = S3()
    upload(s3, bucket, files)
    assert {put["Bucket"] for put in s3.puts} == {"fleet-dashboardbucket-1"}
    assert {put["Key"]: put["ContentType"] for put in s3.puts}["index.html"].startswith("text/html")
    config = json.loads(next(put["Body"] for put in s3.puts if put["Key"] == CONFIG_KEY))
    assert config["tenant_claim"] == "custom:tenant"


def test_publish_to_a_stack_without_a_dashboard_says_why() -> None:
    with pytest.raises(NoDashboard, match="only AWS stages"):
        site_for({"ApiUrl": API})


def test_the_local_status_link_points_the_tenant_page_at_the_api() -> None:
    assert tenant_page_url("http://127.0.0.1:8080/", "http://127.0.0.1:9090", "a.b.c") == (
        "http://127.0.0.1:8080/tenant/#api=http%3A%2F%2F127.0.0.1%3A9090&token=a.b.c"
    )


@pytest.fixture
def dashboard() -> Iterator[str]:
    server = DashboardServer(FakeDashboardSource(jobs=[], workers=[]))
    server.start_in_thread()
    yield server.url
    server.shutdown()
    server.server_close()


def test_the_local_dashboard_serves_the_tenant_page_with_a_policy_that_lets_it_call_the_api(dashboard: str) -> None:
    with urllib.request.urlopen(f"{dashboard}tenant/", timeout=5) as response:
        policy, body = response.headers["Content-Security-Policy"], response.read()
    assert b"/static/tenant.js" in body
    assert "connect-src 'self' http://127.0.0.1:*" in policy and "frame-ancestors 'none'" in policy
    with urllib.request.urlopen(f"{dashboard}tenant/{CONFIG_KEY}", timeout=5) as response:
        # no API named (the link's #api= names it); the tenant claim the local API reads
        assert json.loads(response.read()) == {"api_url": "", "issuer": "", "audience": "", "tenant_claim": "tenant"}
    with urllib.request.urlopen(dashboard, timeout=5) as response:
        assert "connect-src" not in response.headers["Content-Security-Policy"]  # the operator's page: self only


# ---------------------------------------------------------------- the AWS stage


@cache
def _aws() -> dict[str, Any]:
    template = transform("prod")
    return existing(template, Conditions(template, parameter_values(template, "prod")))


def _one(kind: str) -> dict[str, Any]:
    (found,) = [r["Properties"] for r in _aws().values() if r["Type"] == kind]
    return dict(found)


def test_the_apis_cors_allows_the_dashboards_origin_alone_with_the_local_gateways_values() -> None:
    # SAM writes the HttpApi's CorsConfiguration into the API's OpenAPI body
    config = _one("AWS::ApiGatewayV2::Api")["Body"]["x-amazon-apigateway-cors"]
    template = transform("prod")
    origins = _resolved(config["allowOrigins"], Conditions(template, parameter_values(template, "prod")), {})
    assert origins == [{"Fn::Sub": "https://${DashboardDistribution.DomainName}"}]
    assert tuple(config["allowMethods"]) == cors.ALLOW_METHODS
    assert tuple(config["allowHeaders"]) == cors.ALLOW_HEADERS
    assert config["maxAge"] == cors.MAX_AGE_S
    assert "allowCredentials" not in config  # the token travels in a header, never in a cookie
    # AND the media bucket lets the same origin, alone, POST a new job's files (the page's uploads)
    bucket = source()["Resources"]["MediaBucket"]["Properties"]["CorsConfiguration"]
    (rule,) = _resolved(bucket, Conditions(template, parameter_values(template, "prod")), {})["CorsRules"]
    assert (rule["AllowedOrigins"], rule["AllowedMethods"]) == (origins, ["POST"])


def _resolved(node: Any, conditions: Conditions, parameters: dict[str, Any]) -> Any:
    """Fn::If taken as the conditions say, AWS::NoValue dropped, Ref to a parameter given its value."""
    if isinstance(node, list):
        items = (_resolved(item, conditions, parameters) for item in node)
        return [item for item in items if item != {"Ref": "AWS::NoValue"}]
    if isinstance(node, dict) and set(node) == {"Fn::If"}:
        name, when_true, when_false = node["Fn::If"]
        return _resolved(when_true if conditions[name] else when_false, conditions, parameters)
    if isinstance(node, dict) and set(node) == {"Ref"} and node["Ref"] in parameters:
        return parameters[node["Ref"]]
    if isinstance(node, dict):
        return {key: _resolved(value, conditions, parameters) for key, value in node.items()}
    return node


CLOUDFRONT_TYPES = ("AWS::CloudFront::",)
# Where the stack makes no distribution: GovCloud and China (no origin access control there), and an
# account that may not create one yet. The API's CORS then allows the operator's origin, or none.
WITHOUT_DISTRIBUTION = {
    "govcloud": {"AWS::Partition": "aws-us-gov", "AWS::Region": "us-gov-west-1"},
    "china": {"AWS::Partition": "aws-cn", "AWS::Region": "cn-north-1"},
    "turned off": {"CreateDashboardDistribution": "false"},
    "turned off, page hosted elsewhere": {
        "CreateDashboardDistribution": "false", "DashboardOrigin": "https://tenants.example.com",
    },
}  # fmt: skip


@pytest.mark.parametrize("overrides", WITHOUT_DISTRIBUTION.values(), ids=WITHOUT_DISTRIBUTION.keys())
def test_without_a_distribution_nothing_needs_cloudfront_and_the_api_allows_the_operators_origin_or_none(
    overrides: dict[str, str],
) -> None:
    # GIVEN the AWS stage where the stack makes no CloudFront distribution
    template = transform("prod")
    parameters = {**parameter_values(template, "prod"), **overrides}
    conditions = Conditions(template, parameters)
    present = existing(template, conditions)
    # WHEN the resources that exist, and what they and the outputs refer to, are listed
    outputs = [o for o in template["Outputs"].values() if conditions.holds(o.get("Condition"))]
    used = {ref for node in [*present.values(), *outputs] for ref in references(node, conditions)}
    # THEN no CloudFront resource exists and nothing refers to one (the page's bucket stays, empty, and
    # its policy lets no distribution read it); the stack names no tenant page
    cloudfront = {n for n, r in template["Resources"].items() if r["Type"].startswith(CLOUDFRONT_TYPES)}
    assert cloudfront and not cloudfront & set(present) and not cloudfront & used
    policy = _resolved(present["DashboardBucketPolicy"]["Properties"]["PolicyDocument"], conditions, parameters)
    assert [statement["Effect"] for statement in policy["Statement"]] == ["Deny"]
    assert not {"DashboardUrl", "DashboardBucketName"} & {n for n, o in template["Outputs"].items()
                                                         if conditions.holds(o.get("Condition"))}  # fmt: skip
    # AND the HTTP API still exists; its CORS allows the operator's origin when given, else none, never *
    # (on the raw template: SAM would put the transform's parameter values in for the Ref)
    cors = source()["Resources"]["HttpApi"]["Properties"]["CorsConfiguration"]
    origins = _resolved(cors["AllowOrigins"], conditions, parameters)
    assert "HttpApi" in present
    assert origins == ([overrides["DashboardOrigin"]] if overrides.get("DashboardOrigin") else [])
    # AND the media bucket takes the page's uploads from that origin alone, or from none (no CORS rule)
    bucket = _resolved(source()["Resources"]["MediaBucket"]["Properties"]["CorsConfiguration"], conditions, parameters)
    uploads_from = [o for rule in bucket.get("CorsRules", []) for o in rule["AllowedOrigins"]]
    assert uploads_from == origins


def test_the_dashboards_cloudfront_names_differ_by_region_and_fit_cloudfronts_limits() -> None:
    # GIVEN the names of the origin access control and the response-headers policy (account-wide names:
    # the same stack name in a second region must not meet the first one's), and their length limits
    resources = source()["Resources"]
    names = {
        "DashboardOriginAccessControl": (resources["DashboardOriginAccessControl"]["Properties"]
                                         ["OriginAccessControlConfig"]["Name"], 64),
        "DashboardHeadersPolicy": (resources["DashboardHeadersPolicy"]["Properties"]
                                   ["ResponseHeadersPolicyConfig"]["Name"], 128),
    }  # fmt: skip

    def stack(name: str, region: str, uuid: str) -> dict[str, str]:
        arn = f"arn:aws:cloudformation:{region}:123456789012:stack/{name}/{uuid}"
        return {**PSEUDO_PARAMETERS, "AWS::Region": region, "AWS::StackName": name, "AWS::StackId": arn}

    first = stack("fleet", "us-east-1", "11111111-2222-3333-4444-555555555555")
    second = stack("fleet", "eu-west-1", "66666666-7777-8888-9999-000000000000")
    longest = stack("s" * 128, "ap-southeast-4", "66666666-7777-8888-9999-000000000000")
    for resource, (name, limit) in names.items():
        # WHEN each is resolved for one stack name deployed in two regions, and for the longest stack name
        # THEN the two differ, and name their region; the longest fits the limit
        assert _evaluate(name, first) != _evaluate(name, second), resource
        assert "eu-west-1" in _evaluate(name, second), resource
        assert len(_evaluate(name, longest)) <= limit, resource


def _evaluate(node: Any, values: dict[str, str]) -> str:
    """A name's Ref, Fn::Sub, Fn::Join, Fn::Select and Fn::Split, for given pseudo parameters."""
    if isinstance(node, str):
        return node
    ((function, argument),) = node.items()
    if function == "Ref":
        return values[argument]
    if function == "Fn::Sub":
        return re.sub(r"\$\{([^}]+)\}", lambda m: values[m.group(1)], argument)
    if function == "Fn::Join":
        return str(argument[0]).join(_evaluate(item, values) for item in argument[1])
    if function == "Fn::Select":
        index, (split,) = argument[0], argument[1].values()
        return _evaluate(split[1], values).split(split[0])[int(index)]
    raise ValueError(f"unsupported function {function}")


def test_the_distribution_serves_the_private_bucket_over_https_through_origin_access_control() -> None:
    config = _one("AWS::CloudFront::Distribution")["DistributionConfig"]
    (bucket_origin,) = config["Origins"]
    assert bucket_origin["OriginAccessControlId"] == {"Fn::GetAtt": ["DashboardOriginAccessControl", "Id"]}
    assert bucket_origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}  # no legacy OAI
    assert config["DefaultCacheBehavior"]["ViewerProtocolPolicy"] == "redirect-to-https"
    assert config["DefaultCacheBehavior"]["AllowedMethods"] == ["GET", "HEAD"]
    assert config["DefaultRootObject"] == "index.html"
    assert _one("AWS::CloudFront::OriginAccessControl")["OriginAccessControlConfig"]["SigningBehavior"] == "always"
    # AND the bucket lets that distribution read, and no one else
    (policy,) = [r["Properties"] for r in _aws().values() if r["Type"] == "AWS::S3::BucketPolicy"
                 and r["Properties"]["Bucket"] == {"Ref": "DashboardBucket"}]  # fmt: skip
    template = transform("prod")
    document = _resolved(policy["PolicyDocument"], Conditions(template, parameter_values(template, "prod")), {})
    allows = [s for s in document["Statement"] if s["Effect"] == "Allow"]
    assert [(s["Principal"], s["Action"]) for s in allows] == [
        ({"Service": "cloudfront.amazonaws.com"}, "s3:GetObject")
    ]
    assert "DashboardDistribution" in json.dumps(allows[0]["Condition"]["StringEquals"]["AWS:SourceArn"])


def test_the_pages_headers_forbid_framing_sniffing_and_plain_http_and_match_the_sites_policy() -> None:
    headers = _one("AWS::CloudFront::ResponseHeadersPolicy")["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    # The region's APIs, and its buckets (a new job's uploads): the page's own <meta> names the exact ones.
    regional = ("https://*.execute-api.${AWS::Region}.${AWS::URLSuffix} https://*.s3.${AWS::Region}.${AWS::URLSuffix}"
                " https://*.s3.${AWS::URLSuffix}")  # fmt: skip
    assert headers["ContentSecurityPolicy"]["ContentSecurityPolicy"] == {"Fn::Sub": content_policy(regional)}
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31536000
    assert headers["ContentTypeOptions"]["Override"] is True
    assert headers["FrameOptions"]["FrameOption"] == "DENY"
    assert all(header["Override"] is True for header in headers.values())


def test_the_stack_names_the_dashboards_url() -> None:
    outputs = transform("prod")["Outputs"]
    assert outputs["DashboardUrl"]["Value"] == {"Fn::Sub": "https://${DashboardDistribution.DomainName}/"}
    assert set(OUTPUTS) <= set(outputs)
