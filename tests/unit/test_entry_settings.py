"""Entry points read the environment once and hand frozen settings down; library code raises domain errors."""

from __future__ import annotations

import pytest

from fleetctl import connection
from functions.dlq import app as dlq_app
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.environment.watchdog import WatchdogEnvironment
from fusionfleet.errors import FusionFleetError

SLICER_ENV = {
    "AWS_REGION": "eu-west-1",
    "WORK_BUCKET": "work",
    "STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:1:stateMachine:render",
    "NOTIFICATION_TOPIC_ARN": "arn:aws:sns:eu-west-1:1:notices",
}


def test_the_slicer_settings_come_from_the_mapping_it_is_given() -> None:
    config = from_env(SlicerEnvironment, {**SLICER_ENV, "ENCODER_THREADS": "4", "DEFAULT_ENGINE": "copy"})
    assert (config.region, config.endpoint_url) == ("eu-west-1", None)
    assert (config.work_bucket, config.encoder_threads, config.default_engine) == ("work", 4, "copy")
    assert config.timeouts.accepted_backlog_s == 21600 and config.render_concurrency == 1000


def test_the_dead_letter_settings_come_from_the_mapping_it_is_given() -> None:
    aws = dlq_app.settings({"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://localhost:4566"})
    assert (aws.region, aws.endpoint_url) == ("us-east-1", "http://localhost:4566")


def test_a_connection_without_a_region_is_a_domain_error_not_an_exit() -> None:
    with pytest.raises(FusionFleetError, match="no AWS region"):
        connection.resolve(env={"FUSIONFLEET_ENDPOINT_URL": "http://localhost:4566"})


def test_a_connection_takes_the_environment_it_is_given() -> None:
    conn = connection.resolve(
        env={"FUSIONFLEET_ENDPOINT_URL": "http://e", "AWS_DEFAULT_REGION": "x", "FUSIONFLEET_STACK": "s"}
    )
    assert (conn.aws.endpoint_url, conn.aws.region, conn.stack_name) == ("http://e", "x", "s")


def test_the_watchdog_settings_come_from_the_mapping_it_is_given() -> None:
    config = from_env(WatchdogEnvironment, {**SLICER_ENV, "WATCHDOG_STALL_SECONDS": "900"})
    assert config.region == "eu-west-1" and config.work_bucket == "work" and config.policy.stall_s == 900
    assert config.policy.dispatch_grace_s == 300 and config.render_queues == {}
    queues = from_env(WatchdogEnvironment, {**SLICER_ENV, "RENDER_QUEUE_URLS": "q/h,q/n,q/l"}).render_queues
    assert queues == {"high": "q/h", "normal": "q/n", "low": "q/l"}


def test_the_api_settings_come_from_the_mapping_it_is_given() -> None:
    env = {**SLICER_ENV, "MEDIA_BUCKET": "media", "TENANT_CLAIM": "custom:tenant", "UPLOAD_URL_SECONDS": "120"}
    config = from_env(ApiEnvironment, env)
    assert (config.region, config.media_bucket, config.work_bucket) == ("eu-west-1", "media", "work")
    assert (config.tenant_claim, config.upload_url_s, config.download_url_s) == ("custom:tenant", 120, 900)
    assert from_env(ApiEnvironment, {**env, "TENANT_CLAIM": ""}).tenant_claim == "tenant"


def test_the_slicer_checks_gpu_quota_only_where_the_fleet_is_named() -> None:
    local = from_env(SlicerEnvironment, SLICER_ENV)
    assert local.gpu_fleet is None
    config = from_env(
        SlicerEnvironment,
        {**SLICER_ENV, "GPU_INSTANCE_TYPES": "g5.xlarge, g6.xlarge", "GPU_ON_DEMAND_PERCENTAGE": "25"},
    )
    assert config.gpu_fleet is not None
    assert (config.gpu_fleet.instance_types, config.gpu_fleet.uses_spot) == (("g5.xlarge", "g6.xlarge"), True)
    assert config.gpu_quota_cache_s == 300
