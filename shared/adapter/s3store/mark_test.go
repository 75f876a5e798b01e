package s3store_test

import (
	"context"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/s3fake"
)

// DeletePayload marks the version the reference pins (the payload bucket's
// lifecycle removes only marked versions) before it deletes the key; when
// the mark cannot be set, nothing is deleted.
func TestDeletePayloadMarksThePinnedVersionFirst(t *testing.T) {
	ctx := context.Background()
	f := s3fake.New(t0, 7)
	p := s3store.New(f, bucket, "")
	ref, err := p.PutPayload(ctx, "k", []byte("data"))
	if err != nil {
		t.Fatal(err)
	}
	f.SetFault(s3fake.Fault{Before: func(op, _ string) error {
		if op == "PutObjectTagging" {
			return s3fake.Error(op, 503, "SlowDown", "Please reduce your request rate.")
		}
		return nil
	}})
	if err := p.DeletePayload(ctx, ref); err == nil {
		t.Fatal("delete succeeded without the mark")
	}
	if vs := f.Versions(bucket, "k"); len(vs) != 1 || vs[0].DeleteMarker {
		t.Fatalf("an unmarked object was deleted: %+v", vs)
	}
	f.SetFault(s3fake.Fault{})
	if err := p.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	vs := f.Versions(bucket, "k")
	if len(vs) != 2 || vs[0].ID != ref.VersionID || vs[0].Tags[s3store.ArchivedTagKey] != s3store.ArchivedTagValue || !vs[1].DeleteMarker {
		t.Fatalf("versions after delete: %+v", vs)
	}
}
