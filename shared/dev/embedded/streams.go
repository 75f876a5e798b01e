package embedded

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Streams of a persistent stack. kumo keeps its DynamoDB streams in one
// process-wide store that no snapshot holds: a table restored from a
// snapshot still names its stream (LatestStreamArn) but kumo drops every
// change to it, because the stream is not registered; and kumo's sequence
// numbers restart at 1, below the ones the ledger recorded before the
// restart (so it would take new changes for ones already ledgered). For a
// persistent in-process stack, Start therefore registers each restored
// table's stream again under its ARN and moves the sequence counter past
// any number an earlier run can have used: to the current time in
// microseconds, which no run reaches at fewer than a million changes a
// second. kumo's store is reached with go:linkname and a mirror of its
// layout (kumo v0.33.1, internal/streams); TestStatePersistsAcrossRestarts
// fails if the layout drifts.

// kumoStreamStore mirrors kumo's streams.Store (only its layout matters:
// the first two fields are never used here).
type kumoStreamStore struct {
	_               sync.RWMutex
	_               map[string]unsafe.Pointer
	sequenceCounter uint64
}

// kumoStreamInfo mirrors kumo's streams.StreamInfo.
type kumoStreamInfo struct {
	StreamARN      string
	TableName      string
	StreamViewType string
	StreamLabel    string
	StreamStatus   string
	KeySchema      []kumoKeySchemaElement
	CreationTime   time.Time
}

type kumoKeySchemaElement struct {
	AttributeName string
	KeyType       string
}

//go:linkname kumoStreams github.com/sivchari/kumo/internal/streams.Global
var kumoStreams *kumoStreamStore

//go:linkname kumoRegisterStream github.com/sivchari/kumo/internal/streams.(*Store).RegisterStream
func kumoRegisterStream(s *kumoStreamStore, info *kumoStreamInfo)

// advanceStreamSequence moves kumo's stream sequence counter to at least
// the current time in microseconds.
func advanceStreamSequence() {
	floor := uint64(time.Now().UnixMicro())
	for {
		cur := atomic.LoadUint64(&kumoStreams.sequenceCounter)
		if cur >= floor || atomic.CompareAndSwapUint64(&kumoStreams.sequenceCounter, cur, floor) {
			return
		}
	}
}

// restoreStream registers the stream of a table restored from a snapshot
// when kumo no longer has it.
func (s *Stack) restoreStream(ctx context.Context, table *dynamodb.DescribeTableOutput) error {
	arn := aws.ToString(table.Table.LatestStreamArn)
	if arn == "" {
		return nil
	}
	_, err := s.Clients.DynamoDBStreams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	var nf *streamtypes.ResourceNotFoundException
	if err == nil {
		return nil
	}
	if !errors.As(err, &nf) && !strings.Contains(err.Error(), "not found") {
		return fmt.Errorf("describe stream %s: %w", arn, err)
	}
	info := &kumoStreamInfo{
		StreamARN: arn, TableName: aws.ToString(table.Table.TableName), StreamStatus: "ENABLED",
		StreamLabel: aws.ToString(table.Table.LatestStreamLabel), CreationTime: time.Now(),
	}
	if table.Table.StreamSpecification != nil {
		info.StreamViewType = string(table.Table.StreamSpecification.StreamViewType)
	}
	for _, k := range table.Table.KeySchema {
		info.KeySchema = append(info.KeySchema, kumoKeySchemaElement{AttributeName: aws.ToString(k.AttributeName), KeyType: string(k.KeyType)})
	}
	kumoRegisterStream(kumoStreams, info)
	if _, err := s.Clients.DynamoDBStreams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}); err != nil {
		return fmt.Errorf("stream %s of a restored table could not be registered again: %w", arn, err)
	}
	return nil
}
