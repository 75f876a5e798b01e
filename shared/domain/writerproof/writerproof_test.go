package writerproof_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/macfake"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

const (
	ingestARN  = "arn:aws:kms:us-east-1:111122223333:key/ingest"
	redriveARN = "arn:aws:kms:us-east-1:111122223333:key/redrive"
)

func leaves(n int) []writerproof.Leaf {
	out := make([]writerproof.Leaf, n)
	for i := range out {
		out[i] = writerproof.Leaf{Key: fmt.Sprintf("rec-%d", i), Version: int64(i%3 + 1), Seal: fmt.Sprintf("%064x", i)}
	}
	return out
}

func setup() (*macfake.Keys, writerproof.Keys) {
	f := macfake.New(ingestARN, redriveARN)
	return f, writerproof.Keys{ingestARN: writerproof.RoleIngest, redriveARN: writerproof.RoleRedrive}
}

// Every leaf of every tree size proves with one MAC per tree, and only its
// own leaf: another version, key or seal fails.
func TestAnnounceEveryTreeSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, keys := setup()
	for n := 1; n <= 33; n++ {
		p := writerproof.NewProver(macfake.MAC{Keys: f, ARN: ingestARN}, writerproof.RoleIngest)
		ls := leaves(n)
		if err := p.Announce(ctx, ls); err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			pr, err := p.Prove(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			if role, err := writerproof.Check(ctx, keys, f.Verify, l, pr.Encode()); err != nil || role != writerproof.RoleIngest {
				t.Fatalf("n=%d leaf %v: role %q, %v", n, l, role, err)
			}
			for _, other := range []writerproof.Leaf{{l.Key, l.Version + 1, l.Seal}, {l.Key + "x", l.Version, l.Seal}, {l.Key, l.Version, l.Seal + "0"}} {
				if _, err := writerproof.Check(ctx, keys, f.Verify, other, pr.Encode()); !errors.Is(err, writerproof.ErrInvalid) {
					t.Fatalf("n=%d: proof of %v accepted for %v: %v", n, l, other, err)
				}
			}
		}
		if got := p.Calls(); got != 1 {
			t.Fatalf("n=%d: %d MAC calls, want 1", n, got)
		}
	}
}

// A version nobody announced gets a proof of its own; writes waiting at
// once share MAC calls.
func TestProveUnannouncedAndGrouped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, keys := setup()
	p := writerproof.NewProver(macfake.MAC{Keys: f, ARN: redriveARN}, writerproof.RoleRedrive)
	ls := leaves(64)
	var wg sync.WaitGroup
	errs := make([]error, len(ls))
	for i, l := range ls {
		wg.Go(func() {
			pr, err := p.Prove(ctx, l)
			if err == nil {
				_, err = writerproof.Check(ctx, keys, f.Verify, l, pr.Encode())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if c := p.Calls(); c < 1 || c > 64 {
		t.Fatalf("%d calls", c)
	}
}

func TestCheckRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, keys := setup()
	l := leaves(1)[0]
	good, err := writerproof.NewProver(macfake.MAC{Keys: f, ARN: ingestARN}, writerproof.RoleIngest).Prove(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	// A key nobody configured, MACing with its own secret: invalid.
	rogue := macfake.New("arn:aws:kms:us-east-1:111122223333:key/rogue")
	bad, _ := writerproof.NewProver(macfake.MAC{Keys: rogue, ARN: "arn:aws:kms:us-east-1:111122223333:key/rogue"}, writerproof.RoleIngest).Prove(ctx, l)
	claimsRedrive := good
	claimsRedrive.Role = writerproof.RoleRedrive
	otherMAC := good
	otherMAC.MAC = "AAAA"
	longPath := good
	longPath.Path = base64.StdEncoding.EncodeToString(make([]byte, 32))
	for name, enc := range map[string]string{
		"rogue key":        bad.Encode(),
		"role not the key": claimsRedrive.Encode(),
		"other MAC":        otherMAC.Encode(),
		"path too long":    longPath.Encode(),
		"not json":         "{",
		"unknown field":    strings.Replace(good.Encode(), `"v":1`, `"v":1,"x":1`, 1),
	} {
		if _, err := writerproof.Check(ctx, keys, f.Verify, l, enc); !errors.Is(err, writerproof.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := writerproof.Check(ctx, keys, f.Verify, l, ""); !errors.Is(err, writerproof.ErrMissing) {
		t.Errorf("missing: %v", err)
	}
	if role, err := writerproof.Check(ctx, keys, nil, l, good.Encode()); !errors.Is(err, writerproof.ErrUnverified) || role != writerproof.RoleIngest {
		t.Errorf("offline: %q %v", role, err)
	}
}

// The descriptor MAC'd is far below KMS's 4,096 bytes, and the fake
// refuses what KMS refuses.
func TestDescriptorSize(t *testing.T) {
	t.Parallel()
	d := writerproof.Descriptor(writerproof.RoleSweeper, [32]byte{}, writerproof.MaxLeaves)
	if len(d) > 200 {
		t.Fatalf("descriptor is %d bytes", len(d))
	}
	f := macfake.New(ingestARN)
	if _, _, err := (macfake.MAC{Keys: f, ARN: ingestARN}).Generate(context.Background(), make([]byte, 4097)); !errors.Is(err, macfake.ErrMessage) {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"i":0,"k":"k","m":"AA==","n":1,"p":[],"r":"ingest","v":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := writerproof.Parse(s)
		if err == nil {
			_, _ = p.Root(writerproof.Leaf{Key: "a", Version: 1, Seal: "b"})
		}
	})
}
