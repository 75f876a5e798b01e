package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

const sweepRecords = 2000

// parkAll parks n fresh records of a new source.
func parkAll(b *testing.B, st *embedded.Stack, n int) []*quarantine.Record {
	b.Helper()
	ctx := context.Background()
	_, _, recs := seedSource(b, st, n)
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	var out []*quarantine.Record
	for _, r := range recs {
		p, err := r.ParkPoison("bench", time.Now().Add(-time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Replace(ctx, r, p); err != nil {
			b.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// BenchmarkSweeperThroughput archives 2,000 parked records with the sweeper
// (one at a time, as it runs), then runs a raw loop of the calls each
// archive needs at the same (sequential) concurrency: a conditional
// Object Lock PutObject and a conditional PutItem, in the same run.
func BenchmarkSweeperThroughput(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{})
	table, bucket := st.Names["QuarantineTable"], st.Names["ArchiveBucket"]
	store := dynamostore.New(st.Clients.DynamoDB, table)
	for i := 0; i < b.N; i++ {
		parkAll(b, st, sweepRecords)
		svc := sweeper.New(store, dynamostore.NewLister(st.Clients.DynamoDB, table), s3store.New(st.Clients.S3, st.Names["PayloadBucket"], ""),
			s3store.Archiver{API: st.Clients.S3}, nil, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)),
			sweeper.Config{Bucket: bucket, Retention: 24 * time.Hour, MaxPerRun: 100000})
		start := time.Now()
		rep, err := svc.Run(ctx)
		if err != nil || len(rep.Archived) < sweepRecords {
			b.Fatalf("sweep: %v, archived %d", err, len(rep.Archived))
		}
		sweepRate := float64(len(rep.Archived)) / time.Since(start).Seconds()

		raw := parkAll(b, st, sweepRecords)
		type job struct {
			key  string
			body []byte
			sum  string
			stub *quarantine.Record
			prev int64
		}
		var jobs []job
		for _, r := range raw {
			body, _ := json.Marshal(r)
			sum := sha256.Sum256(body)
			stub, err := r.ArchiveStub("bench", quarantine.ArchiveRef{Bucket: bucket, Key: "raw/" + r.DLQID, Seal: r.Seal}, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			jobs = append(jobs, job{key: "raw/" + r.DLQID + "/" + strconv.Itoa(i), body: body, sum: base64.StdEncoding.EncodeToString(sum[:]), stub: stub, prev: r.Version})
		}
		start = time.Now()
		for _, j := range jobs {
			if _, err := st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(j.key), Body: bytes.NewReader(j.body), ChecksumSHA256: aws.String(j.sum),
				IfNoneMatch: aws.String("*"), ObjectLockMode: s3types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(24 * time.Hour)),
			}); err != nil {
				b.Fatal(err)
			}
			item, _ := dynamostore.Marshal(j.stub)
			cond, _ := expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(j.prev))).Build()
			if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
				ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()}); err != nil {
				b.Fatal(err)
			}
		}
		rawRate := sweepRecords / time.Since(start).Seconds()
		b.ReportMetric(sweepRate, "archived/s")
		b.ReportMetric(rawRate, "raw/s")
		b.ReportMetric(sweepRate/rawRate, "ratio")
	}
}
