// Package stackoutputs names the CloudFormation outputs of
// infra/template.yaml that tools read from a deployed stack (dlqctl
// --stack): one list, pinned by a template test, so that a renamed output
// fails a test instead of a command on a real stack.
package stackoutputs

// The outputs dlqctl reads.
const (
	// QuarantineTable is the quarantine table's name (--table).
	QuarantineTable = "QuarantineTableName"
	// PayloadBucket is the claim-check bucket's name (--payload-bucket).
	PayloadBucket = "PayloadBucketName"
	// RedriveFunction is the redrive function's name (--function).
	RedriveFunction = "RedriveFunctionName"
	// ArchiveBucket is the Object Lock bucket that holds the archive and
	// the ledger (--ledger-bucket).
	ArchiveBucket = "ArchiveBucketName"
	// LedgerSigningKey is the ARN of the ledger's KMS signing key
	// (--signing-key).
	LedgerSigningKey = "LedgerSigningKeyArn"
	// OperatorEndpoint is the operator endpoint's URL (--operator-url): a
	// Lambda function URL or an HTTP API with IAM authorization, where
	// AWS verifies who acts (docs/identity.md).
	OperatorEndpoint = "OperatorEndpointUrl"
)

// The writer keys' ARNs (--writer-keys: ingest, redrive, sweeper), read
// when all three are there.
const (
	IngestWriterKey  = "IngestWriterKeyArn"
	RedriveWriterKey = "RedriveWriterKeyArn"
	SweeperWriterKey = "SweeperWriterKeyArn"
)

// WriterKeys lists the writer keys' outputs in --writer-keys order.
func WriterKeys() []string { return []string{IngestWriterKey, RedriveWriterKey, SweeperWriterKey} }

// DLQCTL lists every output dlqctl reads, the writer keys' included.
func DLQCTL() []string {
	return append([]string{QuarantineTable, PayloadBucket, RedriveFunction, ArchiveBucket, LedgerSigningKey, OperatorEndpoint}, WriterKeys()...)
}
