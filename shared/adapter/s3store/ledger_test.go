package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// Versions counts the versions and delete markers of exactly one key on
// versitygw's versioned Object Lock bucket: a longer key under the same
// prefix is not counted. (Pages: TestLedgerObjectVersionsPages.)
func TestLedgerObjectVersions(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	until := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	for _, size := range []int32{0} {
		o := s3store.LedgerObjects{API: st.Clients.S3, Bucket: st.Names["ArchiveBucket"], PageSize: size}
		key := fmt.Sprintf("ledger/digests/%012d.json", size+1)
		count := func(want [2]int) {
			t.Helper()
			n, m, err := o.Versions(ctx, key)
			if err != nil || n != want[0] || m != want[1] {
				t.Fatalf("page size %d: Versions = %d, %d, %v; want %v", size, n, m, err, want)
			}
		}
		count([2]int{0, 0})
		if err := o.PutIfAbsent(ctx, key, []byte(`{"a":1}`), until); err != nil {
			t.Fatal(err)
		}
		for _, longer := range []string{key + ".bak", key + "x"} {
			if err := o.PutIfAbsent(ctx, longer, []byte(`{}`), until); err != nil {
				t.Fatal(err)
			}
		}
		count([2]int{1, 0})
		// A second version over the locked key (what only the bucket
		// policy forbids), then a delete marker over it.
		if _, err := st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(o.Bucket), Key: aws.String(key),
			Body: strings.NewReader(`{"a":2}`), ChecksumAlgorithm: types.ChecksumAlgorithmSha256}); err != nil {
			t.Fatal(err)
		}
		count([2]int{2, 0})
		if _, err := st.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(o.Bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
		count([2]int{2, 1})
	}
}

// versionPages is a LedgerAPI whose ListObjectVersions answers from
// scripted pages, by the key and version markers of the request.
type versionPages struct {
	s3store.LedgerAPI
	pages map[string]*s3.ListObjectVersionsOutput // "keyMarker/versionMarker" → page
	calls int
}

func (v *versionPages) ListObjectVersions(_ context.Context, in *s3.ListObjectVersionsInput, _ ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	v.calls++
	page, ok := v.pages[aws.ToString(in.KeyMarker)+"/"+aws.ToString(in.VersionIdMarker)]
	if !ok {
		return nil, fmt.Errorf("no page after %q/%q", aws.ToString(in.KeyMarker), aws.ToString(in.VersionIdMarker))
	}
	return page, nil
}

// Versions reads every page until a key after the one asked for, counts
// only exact matches (a longer key under the prefix is not the key), and
// refuses a listing that does not advance.
func TestLedgerObjectVersionsPages(t *testing.T) {
	const key = "ledger/digests/000000000001.json"
	ver := func(k, id string) types.ObjectVersion {
		return types.ObjectVersion{Key: aws.String(k), VersionId: aws.String(id)}
	}
	mark := func(k, id string) types.DeleteMarkerEntry {
		return types.DeleteMarkerEntry{Key: aws.String(k), VersionId: aws.String(id)}
	}
	api := &versionPages{pages: map[string]*s3.ListObjectVersionsOutput{
		"/":         {Versions: []types.ObjectVersion{ver(key, "v3")}, DeleteMarkers: []types.DeleteMarkerEntry{mark(key, "m1")}, IsTruncated: aws.Bool(true), NextKeyMarker: aws.String(key), NextVersionIdMarker: aws.String("m1")},
		key + "/m1": {Versions: []types.ObjectVersion{ver(key, "v2")}, IsTruncated: aws.Bool(true), NextKeyMarker: aws.String(key), NextVersionIdMarker: aws.String("v2")},
		key + "/v2": {Versions: []types.ObjectVersion{ver(key, "v1"), ver(key+".bak", "b1")}, IsTruncated: aws.Bool(true), NextKeyMarker: aws.String(key + ".bak"), NextVersionIdMarker: aws.String("b1")},
	}}
	o := s3store.LedgerObjects{API: api, Bucket: "b"}
	n, m, err := o.Versions(context.Background(), key)
	if err != nil || n != 3 || m != 1 || api.calls != 3 {
		t.Fatalf("Versions = %d, %d, %v after %d pages; want 3 versions, 1 marker, 3 pages (none after the longer key)", n, m, err, api.calls)
	}
	stuck := &versionPages{pages: map[string]*s3.ListObjectVersionsOutput{
		"/":         {Versions: []types.ObjectVersion{ver(key, "v2")}, IsTruncated: aws.Bool(true), NextKeyMarker: aws.String(key), NextVersionIdMarker: aws.String("v2")},
		key + "/v2": {Versions: []types.ObjectVersion{ver(key, "v2")}, IsTruncated: aws.Bool(true), NextKeyMarker: aws.String(key), NextVersionIdMarker: aws.String("v2")},
	}}
	if _, _, err := (s3store.LedgerObjects{API: stuck, Bucket: "b"}).Versions(context.Background(), key); err == nil || !strings.Contains(err.Error(), "does not advance") {
		t.Fatalf("a listing that does not advance: %v", err)
	}
}

// A delete marker older than the key's first version (a DeleteObject of
// a predictable key before the ledger wrote it; S3's If-None-Match PUT
// succeeds over a marker) hides nothing and is not counted; a marker over
// the version (the current entry, or not older than the version) is.
// (versitygw adds no marker for a key that does not exist, so the pages
// are scripted.)
func TestLedgerObjectVersionsOlderMarker(t *testing.T) {
	const key = "ledger/digests/000000000001.json"
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ver := func(at time.Time, latest bool) types.ObjectVersion {
		return types.ObjectVersion{Key: aws.String(key), VersionId: aws.String("v1"), LastModified: aws.Time(at), IsLatest: aws.Bool(latest)}
	}
	mark := func(id string, at time.Time, latest bool) types.DeleteMarkerEntry {
		return types.DeleteMarkerEntry{Key: aws.String(key), VersionId: aws.String(id), LastModified: aws.Time(at), IsLatest: aws.Bool(latest)}
	}
	for name, tc := range map[string]struct {
		page    s3.ListObjectVersionsOutput
		markers int
	}{
		"older marker, the version current": {s3.ListObjectVersionsOutput{Versions: []types.ObjectVersion{ver(t0, true)},
			DeleteMarkers: []types.DeleteMarkerEntry{mark("m1", t0.Add(-time.Hour), false)}}, 0},
		"older marker in the same second, the version current": {s3.ListObjectVersionsOutput{Versions: []types.ObjectVersion{ver(t0, true)},
			DeleteMarkers: []types.DeleteMarkerEntry{mark("m1", t0, false)}}, 0},
		"older marker and a marker over the version": {s3.ListObjectVersionsOutput{Versions: []types.ObjectVersion{ver(t0, false)},
			DeleteMarkers: []types.DeleteMarkerEntry{mark("m2", t0.Add(time.Hour), true), mark("m1", t0.Add(-time.Hour), false)}}, 1},
		"a marker over the version": {s3.ListObjectVersionsOutput{Versions: []types.ObjectVersion{ver(t0, false)},
			DeleteMarkers: []types.DeleteMarkerEntry{mark("m2", t0.Add(time.Second), true)}}, 1},
		"only a marker": {s3.ListObjectVersionsOutput{DeleteMarkers: []types.DeleteMarkerEntry{mark("m1", t0, true)}}, 1},
	} {
		api := &versionPages{pages: map[string]*s3.ListObjectVersionsOutput{"/": &tc.page}}
		n, m, err := (s3store.LedgerObjects{API: api, Bucket: "b"}).Versions(context.Background(), key)
		if err != nil || m != tc.markers || n != len(tc.page.Versions) {
			t.Errorf("%s: Versions = %d, %d, %v; want %d versions, %d markers", name, n, m, err, len(tc.page.Versions), tc.markers)
		}
	}
}
