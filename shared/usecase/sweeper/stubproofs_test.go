package sweeper_test

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// countingArchive counts the reads of archive objects and their
// retention, and fails or alters them when told.
type countingArchive struct {
	s3store.ArchiveAPI
	gets, retentions atomic.Int64
	failGet          bool
	governance       bool
}

func (c *countingArchive) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.gets.Add(1)
	if c.failGet {
		return nil, errors.New("InvalidObjectState: the object is in another storage class")
	}
	return c.ArchiveAPI.GetObject(ctx, in, opts...)
}

func (c *countingArchive) GetObjectRetention(ctx context.Context, in *s3.GetObjectRetentionInput, opts ...func(*s3.Options)) (*s3.GetObjectRetentionOutput, error) {
	c.retentions.Add(1)
	out, err := c.ArchiveAPI.GetObjectRetention(ctx, in, opts...)
	if err == nil && c.governance && out.Retention != nil {
		out.Retention.Mode = s3types.ObjectLockRetentionModeGovernance
	}
	return out, err
}

// fakeStubProofs knows the version ids in known and records Passed.
type fakeStubProofs struct {
	known  map[string]bool
	asked  []string
	passed []string
}

func (f *fakeStubProofs) Known(_ *quarantine.Record, v string) bool {
	f.asked = append(f.asked, v)
	return f.known[v]
}

func (f *fakeStubProofs) Passed(_ *quarantine.Record, v string) { f.passed = append(f.passed, v) }

// VerifyStubProven reads neither the object nor its retention when a
// proof holds for the key's first version, but lists the key's versions
// and finds what VerifyStub finds; it records a proof only when the
// object's content and retention both pass, never for a read that
// failed, a retention that is not COMPLIANCE or a stub its object does
// not match.
func TestVerifyStubProvenReadsOnlyWhatItMust(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.parked(t, "p", "")
	e.clock.Advance(3 * time.Hour)
	if rep, err := e.sweeper(nil, nil).Run(ctx); err != nil || len(rep.Archived) != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	stub := e.get(t, r.DLQID)
	first := stub.Archive.VersionID
	run := func(api *countingArchive, stub *quarantine.Record, proofs *fakeStubProofs) ([]string, error) {
		t.Helper()
		var sp s3store.StubProofs
		if proofs != nil {
			sp = proofs
		}
		problems, err := s3store.VerifyStubProven(ctx, api, stub, sp)
		var out []string
		for _, p := range problems {
			out = append(out, p.Kind+" "+p.What)
		}
		return out, err
	}
	api := &countingArchive{ArchiveAPI: e.st.Clients.S3}
	proofs := &fakeStubProofs{known: map[string]bool{}}
	if got, err := run(api, stub, proofs); err != nil || len(got) != 0 || api.gets.Load() != 1 || api.retentions.Load() != 1 || !reflect.DeepEqual(proofs.passed, []string{first}) {
		t.Fatalf("no proof yet: %v %v, %d gets, %d retentions, passed %v", got, err, api.gets.Load(), api.retentions.Load(), proofs.passed)
	}
	// Proven: nothing read, the listing checked.
	api = &countingArchive{ArchiveAPI: e.st.Clients.S3}
	proven := &fakeStubProofs{known: map[string]bool{first: true}}
	if got, err := run(api, stub, proven); err != nil || len(got) != 0 || api.gets.Load() != 0 || api.retentions.Load() != 0 || !reflect.DeepEqual(proven.asked, []string{first}) {
		t.Fatalf("proven: %v %v, %d gets, %d retentions, asked %v", got, err, api.gets.Load(), api.retentions.Load(), proven.asked)
	}
	bucket, key := aws.String(stub.Archive.Bucket), aws.String(stub.Archive.Key)
	if _, err := e.st.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: key}); err != nil {
		t.Fatal(err)
	}
	want, err := run(&countingArchive{ArchiveAPI: e.st.Clients.S3}, stub, nil)
	if err != nil || len(want) != 1 {
		t.Fatalf("a delete marker, without proofs: %v %v", want, err)
	}
	if got, err := run(&countingArchive{ArchiveAPI: e.st.Clients.S3}, stub, proven); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a delete marker, proven: %v %v, want %v", got, err, want)
	}

	// No proof is recorded for a check that did not pass.
	for name, c := range map[string]struct {
		api  *countingArchive
		stub func() *quarantine.Record
	}{
		"a read that fails":      {&countingArchive{ArchiveAPI: e.st.Clients.S3, failGet: true}, func() *quarantine.Record { return stub }},
		"a GOVERNANCE retention": {&countingArchive{ArchiveAPI: e.st.Clients.S3, governance: true}, func() *quarantine.Record { return stub }},
		"a stub its object does not match": {&countingArchive{ArchiveAPI: e.st.Clients.S3}, func() *quarantine.Record {
			s := *stub
			s.BodySHA256 = "0000000000000000000000000000000000000000000000000000000000000000"
			if err := quarantine.SealRecord(&s); err != nil {
				t.Fatal(err)
			}
			return &s
		}},
	} {
		p := &fakeStubProofs{known: map[string]bool{}}
		got, err := run(c.api, c.stub(), p)
		if (err == nil && len(got) <= len(want)) || len(p.passed) != 0 {
			t.Errorf("%s: %v %v, passed %v", name, got, err, p.passed)
		}
	}
}
