package ledger

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The problems of a bucket's object versions (Input.Versions,
// VersionProblems). Object Lock keeps a locked version's bytes, but not
// the key: a DeleteObject without a version id adds a delete marker that
// hides them from LIST and GET, and a plain PutObject over the key makes
// a new current version beside them. The ledger writes every key once
// (If-None-Match), so either is someone else's write.
const (
	// KindObjectDeleteMarker: a delete marker on a key (subject: the key;
	// detail: the marker's version id and time).
	KindObjectDeleteMarker Kind = "object-delete-marker"
	// KindObjectSecondVersion: a key with more than one version (subject:
	// the key; detail: the first version, which is checked, and the
	// others).
	KindObjectSecondVersion Kind = "object-second-version"
)

// ObjectVersion is one entry of a bucket's version listing
// (ListObjectVersions): a version of an object, or a delete marker.
type ObjectVersion struct {
	Key          string    `json:"key"`
	VersionID    string    `json:"version_id"`
	LastModified time.Time `json:"last_modified"`
	Latest       bool      `json:"latest,omitempty"`
	DeleteMarker bool      `json:"delete_marker,omitempty"`
}

// versionsByKey groups vs by key, each key's versions (not the markers)
// oldest first: by LastModified, and within a second (S3's precision)
// the one listed later first (S3 lists a key's versions newest first).
func versionsByKey(vs []ObjectVersion) (versions, markers map[string][]ObjectVersion, keys []string) {
	type listed struct {
		v   ObjectVersion
		pos int
	}
	byKey := map[string][]listed{}
	for i, v := range vs {
		if _, seen := byKey[v.Key]; !seen {
			keys = append(keys, v.Key)
		}
		byKey[v.Key] = append(byKey[v.Key], listed{v, i})
	}
	versions, markers = map[string][]ObjectVersion{}, map[string][]ObjectVersion{}
	for k, list := range byKey {
		slices.SortStableFunc(list, func(a, b listed) int {
			return cmp.Or(a.v.LastModified.Compare(b.v.LastModified), cmp.Compare(b.pos, a.pos))
		})
		for _, l := range list {
			if l.v.DeleteMarker {
				markers[k] = append(markers[k], l.v)
			} else {
				versions[k] = append(versions[k], l.v)
			}
		}
	}
	slices.Sort(keys)
	return versions, markers, keys
}

// FirstVersions returns each key's first version: the oldest that is not
// a delete marker, the one the ledger wrote (If-None-Match: the key was
// free) and Object Lock keeps. Read it by its version id, and the
// ledger is checked with its locked bytes whatever was written over or
// in front of it. A key with only delete markers has none.
func FirstVersions(vs []ObjectVersion) map[string]ObjectVersion {
	versions, _, _ := versionsByKey(vs)
	out := make(map[string]ObjectVersion, len(versions))
	for k, list := range versions {
		if len(list) > 0 {
			out[k] = list[0]
		}
	}
	return out
}

// VersionProblems names every delete marker (KindObjectDeleteMarker) and
// every key with more than one version (KindObjectSecondVersion) in vs,
// sorted by key.
func VersionProblems(vs []ObjectVersion) []Problem {
	versions, markers, keys := versionsByKey(vs)
	var out []Problem
	for _, k := range keys {
		first := "no version under the key"
		if list := versions[k]; len(list) > 0 {
			first = "its first version " + describeVersion(list[0]) + " is the one checked"
		}
		for _, m := range markers[k] {
			hides := ""
			if m.Latest {
				hides = "; it hides the key from LIST and GET"
			}
			out = append(out, Problem{Kind: KindObjectDeleteMarker, Subject: k,
				Detail: fmt.Sprintf("delete marker %s%s (%s)", describeVersion(m), hides, first)})
		}
		if list := versions[k]; len(list) > 1 {
			later := make([]string, 0, len(list)-1)
			for _, v := range list[1:] {
				later = append(later, describeVersion(v))
			}
			out = append(out, Problem{Kind: KindObjectSecondVersion, Subject: k,
				Detail: fmt.Sprintf("%d versions: %s written after the first, %s, which is the one checked", len(list), strings.Join(later, ", "), describeVersion(list[0]))})
		}
	}
	return out
}

// KeyVersions returns key's versions in vs and its delete markers, each
// oldest first (as FirstVersions orders them).
func KeyVersions(vs []ObjectVersion, key string) (versions, markers []ObjectVersion) {
	var mine []ObjectVersion
	for _, v := range vs {
		if v.Key == key {
			mine = append(mine, v)
		}
	}
	byKey, markersByKey, _ := versionsByKey(mine)
	return byKey[key], markersByKey[key]
}

// String is the version as a problem names it: "ID of TIME".
func (v ObjectVersion) String() string { return describeVersion(v) }

func describeVersion(v ObjectVersion) string {
	id := v.VersionID
	if id == "" {
		id = "null"
	}
	if v.LastModified.IsZero() {
		return id
	}
	return id + " of " + v.LastModified.UTC().Format(time.RFC3339)
}

// versions names Input.Versions' delete markers and second versions.
func (v *verifier) versions() {
	v.res.Problems = append(v.res.Problems, VersionProblems(v.in.Versions)...)
}
