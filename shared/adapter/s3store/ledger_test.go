package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The ledger's objects on versitygw's Object Lock bucket (the archive
// bucket): written once, locked in COMPLIANCE mode, listed in pages.
func TestLedgerObjectsOnAnObjectLockBucket(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := s3store.LedgerObjects{API: st.Clients.S3, Bucket: st.Names["ArchiveBucket"], PageSize: 2}
	until := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	key := "ledger/segments/shard-1/0001.json"
	if err := o.PutIfAbsent(ctx, key, []byte(`{"a":1}`), until); err != nil {
		t.Fatal(err)
	}
	if err := o.PutIfAbsent(ctx, key, []byte(`{"a":2}`), until); !errors.Is(err, ledger.ErrExists) {
		t.Fatalf("second put: %v, want ErrExists", err)
	}
	got, err := o.Get(ctx, key)
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Get = %s, %v", got, err)
	}
	ret, err := st.Clients.S3.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(o.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if ret.Retention.Mode != types.ObjectLockRetentionModeCompliance || !ret.Retention.RetainUntilDate.Equal(until) {
		t.Fatalf("retention %+v, want COMPLIANCE until %s", ret.Retention, until)
	}
	if _, err := o.Get(ctx, "ledger/segments/none.json"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	var want []string
	for i := 2; i <= 6; i++ {
		k := fmt.Sprintf("ledger/segments/shard-1/%04d.json", i)
		want = append(want, k)
		if err := o.PutIfAbsent(ctx, k, []byte("{}"), until); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.PutIfAbsent(ctx, "ledger/segments/shard-2/0001.json", []byte("{}"), until); err != nil {
		t.Fatal(err)
	}
	keys, err := o.List(ctx, "ledger/segments/shard-1/", key)
	if err != nil || !slices.Equal(keys, want) {
		t.Fatalf("List = %v, %v; want %v", keys, err, want)
	}
	all, err := o.List(ctx, "ledger/segments/shard-1/", "")
	if err != nil || len(all) != 6 {
		t.Fatalf("List all = %v, %v", all, err)
	}
}
