package s3store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// On versitygw's Object Lock bucket, as on S3: a plain PUT over a locked
// key and a DELETE without a version id are accepted (a second version, a
// delete marker); ObjectVersions lists both, in pages, and reads the
// locked first version by its id.
func TestObjectVersionsSeeMarkersAndSecondVersions(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bucket := st.Names["ArchiveBucket"]
	lo := s3store.LedgerObjects{API: st.Clients.S3, Bucket: bucket}
	until := time.Now().Add(48 * time.Hour)
	over, hidden, plain := "ledger/versions/a.json", "ledger/versions/b.json", "ledger/versions/c.json"
	for _, k := range []string{over, hidden, plain} {
		if err := lo.PutIfAbsent(ctx, k, []byte(`{"locked":"`+k+`"}`), until); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(over), Body: bytes.NewReader([]byte(`{"forged":1}`))}); err != nil {
		t.Fatalf("a plain put over a locked key: %v", err)
	}
	if _, err := st.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(hidden)}); err != nil {
		t.Fatalf("a delete without a version id: %v", err)
	}
	if keys, err := lo.List(ctx, "ledger/versions/", ""); err != nil || len(keys) != 2 {
		t.Fatalf("ListObjectsV2 sees %v, %v (the marker hides %s)", keys, err, hidden)
	}
	ov := s3store.ObjectVersions{API: st.Clients.S3, Bucket: bucket, PageSize: 2}
	vs, err := ov.List(ctx, "ledger/versions/")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 5 {
		t.Fatalf("listed %d versions and markers, want 5: %+v", len(vs), vs)
	}
	first := ledger.FirstVersions(vs)
	for _, k := range []string{over, hidden, plain} {
		b, err := ov.Get(ctx, k, first[k].VersionID)
		if err != nil || string(b) != `{"locked":"`+k+`"}` {
			t.Fatalf("first version of %s: %s, %v", k, b, err)
		}
	}
	probs := ledger.VersionProblems(vs)
	if len(probs) != 2 || probs[0].Kind != ledger.KindObjectSecondVersion || probs[0].Subject != over ||
		probs[1].Kind != ledger.KindObjectDeleteMarker || probs[1].Subject != hidden {
		t.Fatalf("problems %v", probs)
	}
	if _, err := (s3store.ObjectVersions{API: st.Clients.S3, Bucket: "no-such-bucket"}).List(ctx, "ledger/"); err == nil {
		t.Fatal("listing a missing bucket passed")
	}
}
