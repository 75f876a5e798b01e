#!/usr/bin/env bash
# Deploys infra/template.yaml into LocalStack once it is ready: uploads each
# function's bootstrap zip built by `make build`, points that function's
# CodeUri at its zip, and runs the same template through CloudFormation
# (SAM transform).
set -euo pipefail
stack=${STACK_NAME:-dlqq}
artifacts=${stack}-artifacts
awslocal s3 mb "s3://${artifacts}" >/dev/null 2>&1 || true
for fn in ingest redrive sweeper metrics ledger digest operator; do
  awslocal s3 cp "/opt/dlqq/build/${fn}.zip" "s3://${artifacts}/${fn}.zip"
done
# Each function resource's CodeUri (../, built by `sam build`) becomes its zip.
awk -v bucket="${artifacts}" '
  /^  [A-Za-z0-9]+:$/ { id = substr($1, 1, length($1) - 1) }
  /CodeUri: \.\.\// {
    zip = ""
    if (id == "IngestFunction") zip = "ingest"
    if (id == "RedriveFunction") zip = "redrive"
    if (id == "SweeperFunction") zip = "sweeper"
    if (id == "MetricsFunction") zip = "metrics"
    if (id == "LedgerFunction") zip = "ledger"
    if (id == "DigestFunction") zip = "digest"
    if (id == "OperatorFunction") zip = "operator"
    if (zip == "") { print "no zip for " id > "/dev/stderr"; exit 1 }
    sub(/CodeUri: \.\.\//, "CodeUri: s3://" bucket "/" zip ".zip")
  }
  { print }
' /opt/dlqq/infra/template.yaml > /tmp/template.yaml
awslocal cloudformation deploy \
  --stack-name "${stack}" \
  --template-file /tmp/template.yaml \
  --capabilities CAPABILITY_IAM CAPABILITY_AUTO_EXPAND \
  --parameter-overrides MaxReceiveCount=3 NamingMode=generated LegacyStatusIndex=drop "AlarmEmail=${ALARM_EMAIL:-dlqq-alarms@example.com}"
awslocal cloudformation describe-stacks --stack-name "${stack}" --query 'Stacks[0].Outputs'
