#!/usr/bin/env bash
# Deploys infra/template.yaml into LocalStack once it is ready: uploads the
# ingest bootstrap zip built by `make build`, points the function's CodeUri at
# it, and runs the same template through CloudFormation (SAM transform).
set -euo pipefail
stack=${STACK_NAME:-dlqq}
artifacts=${stack}-artifacts
awslocal s3 mb "s3://${artifacts}" >/dev/null 2>&1 || true
awslocal s3 cp /opt/dlqq/build/ingest.zip "s3://${artifacts}/ingest.zip"
sed "s#CodeUri: ../#CodeUri: s3://${artifacts}/ingest.zip#" /opt/dlqq/infra/template.yaml > /tmp/template.yaml
awslocal cloudformation deploy \
  --stack-name "${stack}" \
  --template-file /tmp/template.yaml \
  --capabilities CAPABILITY_IAM CAPABILITY_AUTO_EXPAND \
  --parameter-overrides MaxReceiveCount=3
awslocal cloudformation describe-stacks --stack-name "${stack}" --query 'Stacks[0].Outputs'
