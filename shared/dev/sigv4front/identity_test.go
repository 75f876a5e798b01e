package sigv4front

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestDefaultIdentities(t *testing.T) {
	t.Parallel()
	const account = "000000000000"
	ids := DefaultIdentities(account)
	if !slices.Equal(ids, DefaultIdentities(account)) {
		t.Fatal("DefaultIdentities is not deterministic")
	}
	keyID := regexp.MustCompile(`^AKIA[A-Z2-7]{16}$`)
	userID := regexp.MustCompile(`^AIDA[A-Z2-7]{17}$`)
	want := map[string]bool{"operator-a": true, "operator-b": true, "auditor": false}
	seen := map[string]bool{}
	for _, id := range ids {
		mayInvoke, ok := want[id.Name]
		switch {
		case !ok:
			t.Errorf("unexpected identity %q", id.Name)
		case id.MayInvoke != mayInvoke:
			t.Errorf("%s: MayInvoke %v, want %v", id.Name, id.MayInvoke, mayInvoke)
		case !keyID.MatchString(id.AccessKeyID):
			t.Errorf("%s: access key id %q does not look like an AWS one", id.Name, id.AccessKeyID)
		case len(id.SecretAccessKey) != 40:
			t.Errorf("%s: secret of %d characters, want 40", id.Name, len(id.SecretAccessKey))
		case !userID.MatchString(id.UserID):
			t.Errorf("%s: user id %q does not look like an AWS one", id.Name, id.UserID)
		case id.ARN != "arn:aws:iam::"+account+":user/"+id.Name || id.Account != account || id.SessionToken != "":
			t.Errorf("%s: principal %+v", id.Name, id)
		}
		for _, v := range []string{id.AccessKeyID, id.SecretAccessKey, id.UserID} {
			if seen[v] {
				t.Errorf("%s: %q is not unique", id.Name, v)
			}
			seen[v] = true
		}
	}
	if len(ids) != len(want) {
		t.Fatalf("%d identities, want %d", len(ids), len(want))
	}
	if other := DefaultIdentities("111122223333"); other[0].AccessKeyID == ids[0].AccessKeyID {
		t.Error("another account gets the same keys")
	}
	if _, err := NewStore(ids...); err != nil {
		t.Fatal(err)
	}
}

func TestNewStoreRefusesBadIdentities(t *testing.T) {
	t.Parallel()
	a := DefaultIdentities("000000000000")[0]
	dup := a
	dup.Name = "copy"
	_, err := NewStore(a, dup, Identity{Name: "keyless"})
	if err == nil {
		t.Fatal("NewStore accepted a duplicate key and a keyless identity")
	}
	for _, want := range []string{`"copy"`, `"keyless"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestStoreLookup(t *testing.T) {
	t.Parallel()
	ids := DefaultIdentities("000000000000")
	s := mustStore(t, ids...)
	for _, id := range ids {
		if got, ok := s.Lookup(id.AccessKeyID); !ok || got != id {
			t.Errorf("Lookup(%s) = %+v, %v", id.AccessKeyID, got, ok)
		}
	}
	if _, ok := s.Lookup("AKIAUNKNOWN000000000"); ok {
		t.Error("Lookup found an unknown key")
	}
}

func mustStore(t testing.TB, ids ...Identity) *Store {
	t.Helper()
	s, err := NewStore(ids...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
