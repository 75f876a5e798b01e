package archive_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/archive"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// archived returns a parked record's archive object bytes and the stub
// that points at them.
func archived(t *testing.T) ([]byte, *quarantine.Record) {
	t.Helper()
	body := `{"lot":"L-1"}`
	r := &quarantine.Record{DLQID: "orders#k1", Source: "orders", Version: 1, Status: quarantine.StatusQuarantined,
		Body: body, BodyEncoding: quarantine.EncodingUTF8, BodySHA256: quarantine.BodySHA256([]byte(body)), BodySize: int64(len(body)),
		FirstSeen: quarantine.At(now), LastSeen: quarantine.At(now), StatusSince: quarantine.At(now)}
	seal, err := quarantine.ComputeSeal(r)
	if err != nil {
		t.Fatal(err)
	}
	r.Seal = seal
	parked, err := r.ParkManual("op", "bad lot", now)
	if err != nil {
		t.Fatal(err)
	}
	raw, sum, err := (&archive.Envelope{Format: archive.FormatVersion, Record: parked}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	ref := quarantine.ArchiveRef{Bucket: "b", Key: archive.Key(parked), VersionID: "v1", RetainUntil: quarantine.At(now.Add(time.Hour)),
		SHA256: sum, Seal: parked.Seal, ArchivedAt: quarantine.At(now)}
	stub, err := parked.ArchiveStub("sweeper", ref, now)
	if err != nil {
		t.Fatal(err)
	}
	return raw, stub
}

func locked(until time.Time) *archive.Lock {
	return &archive.Lock{Compliance: true, RetainUntil: &until}
}

func TestCheckObjectAcceptsWhatTheSweeperWrote(t *testing.T) {
	raw, stub := archived(t)
	if probs, ok := archive.CheckStub(stub); !ok || len(probs) != 0 {
		t.Fatalf("CheckStub = %v, %v", probs, ok)
	}
	if probs := archive.CheckObject(stub, archive.Object{Raw: raw, Versions: []string{"v1"}, Lock: locked(now.Add(time.Hour))}); len(probs) != 0 {
		t.Fatalf("problems on a sound archive: %v", probs)
	}
}

func TestCheckObjectNamesEachProblem(t *testing.T) {
	raw, stub := archived(t)
	other := strings.Replace(string(raw), "L-1", "L-2", 1)
	for _, c := range []struct {
		name string
		obj  archive.Object
		want []string
	}{
		{"rewritten bytes", archive.Object{Raw: []byte(other), Versions: []string{"v1"}, Lock: locked(now.Add(time.Hour))},
			[]string{"object checksum", "archived record", "archived body"}},
		{"not an envelope", archive.Object{Raw: []byte("{}"), Versions: []string{"v1"}, Lock: locked(now.Add(time.Hour))},
			[]string{"object checksum", "not an archive envelope"}},
		{"a second version", archive.Object{Raw: raw, Versions: []string{"v1", "v2"}, Lock: locked(now.Add(time.Hour))}, []string{"2 versions: v2 written after the first, v1, which is the one checked"}},
		{"a delete marker", archive.Object{Raw: raw, Versions: []string{"v1"}, DeleteMarkers: []string{"dm of 2026-12-01T10:00:00Z"}, Lock: locked(now.Add(time.Hour))}, []string{"delete marker dm of 2026-12-01T10:00:00Z"}},
		{"no version", archive.Object{Raw: raw, Lock: locked(now.Add(time.Hour))}, []string{"holds no version"}},
		{"another version", archive.Object{Raw: raw, Versions: []string{"v9"}, Lock: locked(now.Add(time.Hour))}, []string{"holds versions"}},
		{"versions unreadable", archive.Object{Raw: raw, VersionsErr: "AccessDenied", Lock: locked(now.Add(time.Hour))}, []string{"versions unreadable: AccessDenied"}},
		{"governance lock", archive.Object{Raw: raw, Versions: []string{"v1"}, Lock: &archive.Lock{RetainUntil: &now}}, []string{"not COMPLIANCE"}},
		{"no lock", archive.Object{Raw: raw, Versions: []string{"v1"}}, []string{"not COMPLIANCE"}},
		{"lock unreadable", archive.Object{Raw: raw, Versions: []string{"v1"}, LockErr: "NoSuchObjectLockConfiguration"}, []string{"no readable retention"}},
		{"lock shortened", archive.Object{Raw: raw, Versions: []string{"v1"}, Lock: locked(now)}, []string{"retained until"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			probs := archive.CheckObject(stub, c.obj)
			if len(probs) != len(c.want) {
				t.Fatalf("problems %v, want %d naming %q", probs, len(c.want), c.want)
			}
			for i, p := range probs {
				if p.ID != stub.DLQID || !strings.Contains(p.What, c.want[i]) {
					t.Errorf("problem %d = %+v, want one naming %q", i, p, c.want[i])
				}
				wantKind := map[string]string{"a second version": archive.KindSecondVersion, "a delete marker": archive.KindDeleteMarker}[c.name]
				if p.Kind != wantKind {
					t.Errorf("problem %d kind %q, want %q", i, p.Kind, wantKind)
				}
			}
		})
	}
}

func TestCheckStubRefusesWhatIsNoStub(t *testing.T) {
	_, stub := archived(t)
	tampered := *stub
	tampered.Source = "payments"
	if probs, ok := archive.CheckStub(&tampered); !ok || len(probs) != 1 || !strings.HasPrefix(probs[0].What, "stub: ") {
		t.Fatalf("a re-written stub: %v, %v", probs, ok)
	}
	noRef := *stub
	noRef.Archive = nil
	if probs, ok := archive.CheckStub(&noRef); ok || len(probs) == 0 || probs[len(probs)-1].What != "not an archived stub" {
		t.Fatalf("a stub without a reference: %v, %v", probs, ok)
	}
	if probs := archive.CheckObject(&noRef, archive.Object{}); len(probs) != 1 || probs[0].What != "not an archived stub" {
		t.Fatalf("an object checked against a stub without a reference: %v", probs)
	}
}

func TestDecodeRefusesWhatIsNoEnvelope(t *testing.T) {
	raw, stub := archived(t)
	if env, err := archive.Decode(raw, "k"); err != nil || env.Record.DLQID != stub.DLQID {
		t.Fatalf("Decode = %v, %v", env, err)
	}
	if _, err := archive.Decode([]byte(`{"format":1}`), "k"); err == nil || !strings.Contains(err.Error(), "archive object k is not an archive envelope") {
		t.Fatal("an envelope without a record decoded")
	}
}
