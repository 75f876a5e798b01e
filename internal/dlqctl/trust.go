package dlqctl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Trust says where verify's and ledger export's anchors came from: the
// table, the ledger bucket and the signing key (a flag, a variable, a
// stack output or the default), the stack read, and the key KMS answered
// with and the SHA-256 of its public key. A key or bucket from a stack's
// outputs is only as trustworthy as whoever can update the stack: pin the
// key with --key-fingerprint.
type Trust struct {
	// Table is absent offline (the table is the export's copy).
	Table        Source  `json:"table,omitzero"`
	LedgerBucket *Source `json:"ledger_bucket,omitempty"`
	SigningKey   *Source `json:"signing_key,omitempty"`
	// Stack is the stack whose outputs were read (absent: none was).
	Stack *StackRef `json:"stack,omitempty"`
	// KeyARN is the signing key's ARN as GetPublicKey answered;
	// KeyFingerprint the SHA-256 (hex) of its DER public key; Pinned the
	// --key-fingerprint it was checked against (empty: none).
	KeyARN         string `json:"key_arn,omitempty"`
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
	Pinned         string `json:"pinned_fingerprint,omitempty"`
}

// Source is a setting's value and where it came from: "flag --X",
// "variable NAME", "stack output NAME", "default" (or "set" by a caller
// of the run function).
type Source struct {
	Value string `json:"value"`
	From  string `json:"from"`
}

// StackRef is the stack read: its name, id (ARN), state and when it was
// created and last updated (absent: never).
type StackRef struct {
	Name            string     `json:"name"`
	ID              string     `json:"id"`
	Status          string     `json:"status"`
	CreationTime    *time.Time `json:"creation_time,omitempty"`
	LastUpdatedTime *time.Time `json:"last_updated_time,omitempty"`
}

// source says where the setting of flag came from.
func (a *App) source(flag, value string) Source {
	s := Source{Value: value, From: "default"}
	if out, ok := a.fromOutput[flag]; ok {
		s.From = "stack output " + out
		return s
	}
	for _, st := range a.stackSettings() {
		if st.flag != flag {
			continue
		}
		switch {
		case a.cmd == nil:
			s.From = "set"
		case a.cmd.Flags().Changed(flag):
			s.From = "flag --" + flag
		default:
			for _, name := range st.env {
				if os.Getenv(name) != "" {
					s.From = "variable " + name
					break
				}
			}
		}
	}
	return s
}

// trust is the Trust of this run; ledger adds the bucket and key.
func (a *App) trust(ledger bool) *Trust {
	t := &Trust{Table: a.source("table", a.Table)}
	if ledger {
		b, k := a.source("ledger-bucket", a.LedgerBucket), a.source("signing-key", a.SigningKey)
		t.LedgerBucket, t.SigningKey = &b, &k
	}
	if st := a.stack; st != nil {
		t.Stack = &StackRef{Name: aws.ToString(st.StackName), ID: aws.ToString(st.StackId), Status: string(st.StackStatus),
			CreationTime: st.CreationTime, LastUpdatedTime: st.LastUpdatedTime}
	}
	return t
}

// withKey records the key KMS answered with and its public key's
// fingerprint, and returns the pin's mismatch, if any, as what it says.
func (t *Trust) withKey(keyARN string, der []byte, pin string) (mismatch string) {
	sum := sha256.Sum256(der)
	t.KeyARN, t.KeyFingerprint, t.Pinned = keyARN, hex.EncodeToString(sum[:]), pin
	if pin != "" && pin != t.KeyFingerprint {
		return fmt.Sprintf("the public key of %s has SHA-256 %s, but --key-fingerprint (DLQQ_KEY_FINGERPRINT) pins %s: not the key recorded; the ledger was not checked with it",
			keyARN, t.KeyFingerprint, pin)
	}
	return ""
}

// checkPin checks --key-fingerprint's form and keeps it normalised:
// 64 hex digits, any case, colons and a "sha256:" prefix allowed.
func (a *App) checkPin() error {
	p := strings.ToLower(strings.TrimSpace(a.KeyFingerprint))
	p = strings.ReplaceAll(strings.TrimPrefix(p, "sha256:"), ":", "")
	if p == "" {
		a.KeyFingerprint = ""
		return nil
	}
	if b, err := hex.DecodeString(p); err != nil || len(b) != sha256.Size {
		return &UsageError{fmt.Errorf("--key-fingerprint %q: want the SHA-256 of the signing key's DER public key, 64 hex digits (dlqctl verify prints it)", a.KeyFingerprint)}
	}
	a.KeyFingerprint = p
	return nil
}

// write prints the trust lines of verify and ledger export.
func (t *Trust) write(w io.Writer) {
	line := func(what string, s *Source) string { return fmt.Sprintf("%s %s (%s)", what, s.Value, s.From) }
	var parts []string
	if t.Table.Value != "" {
		parts = append(parts, line("table", &t.Table))
	}
	if t.LedgerBucket != nil {
		parts = append(parts, line("ledger bucket", t.LedgerBucket), line("signing key", t.SigningKey))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "trust: %s\n", strings.Join(parts, ", "))
	}
	if s := t.Stack; s != nil {
		updated := "never updated"
		if s.LastUpdatedTime != nil {
			updated = "last updated " + s.LastUpdatedTime.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "trust: stack %s, %s, %s: its outputs are only as trustworthy as whoever can update it\n", s.ID, s.Status, updated)
	}
	if t.KeyFingerprint != "" {
		pin := "not pinned: record it and pass --key-fingerprint"
		if t.Pinned != "" {
			pin = "pinned by --key-fingerprint"
			if t.Pinned != t.KeyFingerprint {
				pin = "NOT the pinned " + t.Pinned
			}
		}
		fmt.Fprintf(w, "trust: key %s, public key SHA-256 %s (%s)\n", t.KeyARN, t.KeyFingerprint, pin)
	}
}
