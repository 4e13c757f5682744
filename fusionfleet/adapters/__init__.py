"""AWS at the edge: each module a small protocol and its SDK adapter (S3, SQS, Step Functions, SNS)."""
