"""Local stand-ins for the AWS parts the local stack runs itself: API Gateway with its JWT authorizer and
CORS, the S3-to-SQS event source and the EventBridge schedule. Started as processes by `fleetctl local`;
nothing deployed imports them. (LocalStack itself starts through infra/localstack/launch.py.)
"""
