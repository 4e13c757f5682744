"""Per-job webhooks after the Standard Webhooks specification: events, signing, the outbound-address
policy, retries and delivery records."""
