package ledger_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// listing is every object of in as one version each, as ListObjectVersions
// answers for an untouched bucket.
func listing(in ledger.Input, at time.Time) []ledger.ObjectVersion {
	var vs []ledger.ObjectVersion
	for _, part := range []map[string][]byte{in.Segments, in.Digests, in.Baselines} {
		for k := range part {
			vs = append(vs, ledger.ObjectVersion{Key: k, VersionID: "v1-" + k, LastModified: at, Latest: true})
		}
	}
	return vs
}

func TestVerifyNamesDeleteMarkersAndSecondVersions(t *testing.T) {
	t.Parallel()
	f := standard(t)
	at := f.now.Add(-time.Hour)
	clean := f.input()
	clean.Versions = listing(clean, at)
	if res := ledger.Verify(clean); !res.OK() {
		t.Fatalf("an untouched listing: %v", res.Problems)
	}
	seg := firstKey(clean.Segments)
	dig := ledger.DigestKey(1)
	in := f.input()
	in.Versions = listing(in, at)
	for i := range in.Versions {
		if in.Versions[i].Key == seg || in.Versions[i].Key == dig {
			in.Versions[i].Latest = false
		}
	}
	// A delete marker on the segment; a version written over the digest
	// (listed first: S3 lists a key's versions newest first).
	in.Versions = append(in.Versions, ledger.ObjectVersion{Key: seg, VersionID: "marker-1", LastModified: at.Add(time.Minute), Latest: true, DeleteMarker: true})
	in.Versions = slices.Insert(in.Versions, 0, ledger.ObjectVersion{Key: dig, VersionID: "v2", LastModified: at, Latest: true})
	res := ledger.Verify(in)
	if len(res.Problems) != 2 || !res.Has(ledger.KindObjectDeleteMarker, seg) || !res.Has(ledger.KindObjectSecondVersion, dig) {
		t.Fatalf("problems: %v", res.Problems)
	}
	for _, p := range res.Problems {
		switch p.Kind {
		case ledger.KindObjectDeleteMarker:
			if !strings.Contains(p.Detail, "marker-1 of "+at.Add(time.Minute).UTC().Format(time.RFC3339)) || !strings.Contains(p.Detail, "hides the key") {
				t.Fatalf("marker detail: %s", p.Detail)
			}
		case ledger.KindObjectSecondVersion:
			// Same second: the one listed later is the older.
			if !strings.Contains(p.Detail, "v2 of ") || !strings.Contains(p.Detail, "the first, v1-"+dig) {
				t.Fatalf("second version detail: %s", p.Detail)
			}
		}
	}
	// The records are still checked (the fixture's bytes are the first
	// versions): the counts are the clean ledger's.
	if c := ledger.Verify(clean); res.Entries != c.Entries || res.Items != c.Items || res.LastDigest != c.LastDigest {
		t.Fatalf("with versions %+v, clean %+v", res, c)
	}
}

func TestFirstVersionsIsTheOldest(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	vs := []ledger.ObjectVersion{
		{Key: "k", VersionID: "new", LastModified: t0.Add(time.Hour), Latest: true},
		{Key: "k", VersionID: "old", LastModified: t0},
		{Key: "m", VersionID: "a", LastModified: t0},
		{Key: "m", VersionID: "dm", LastModified: t0.Add(time.Minute), DeleteMarker: true, Latest: true},
		{Key: "gone", VersionID: "dm2", LastModified: t0, DeleteMarker: true, Latest: true},
		// The same second: listed newest first, so "y" is the older.
		{Key: "s", VersionID: "x", LastModified: t0, Latest: true},
		{Key: "s", VersionID: "y", LastModified: t0},
	}
	got := ledger.FirstVersions(vs)
	if got["k"].VersionID != "old" || got["m"].VersionID != "a" || got["s"].VersionID != "y" {
		t.Fatalf("first versions %+v", got)
	}
	if _, ok := got["gone"]; ok {
		t.Fatalf("a key with only a delete marker has a first version: %+v", got["gone"])
	}
	probs := ledger.VersionProblems(vs)
	var kinds []string
	for _, p := range probs {
		kinds = append(kinds, string(p.Kind)+" "+p.Subject)
	}
	want := []string{"object-delete-marker gone", "object-second-version k", "object-delete-marker m", "object-second-version s"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("problems %v, want %v", kinds, want)
	}
	if !strings.Contains(probs[0].Detail, "no version under the key") {
		t.Fatalf("%s", probs[0].Detail)
	}
	if len(ledger.VersionProblems(nil)) != 0 {
		t.Fatal("no listing: no problem")
	}
}

func firstKey(m map[string][]byte) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[0]
}
