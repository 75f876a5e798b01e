package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// writerKeysFromStack fills WriterKeys from the stack's three writer-key
// outputs when neither --writer-keys nor DLQQ_WRITER_KEYS gave them and
// the stack has all three.
func (a *App) writerKeysFromStack(outputs map[string]string) {
	if a.WriterKeys != "" {
		return
	}
	var arns []string
	for _, o := range stackoutputs.WriterKeys() {
		if outputs[o] == "" {
			return
		}
		arns = append(arns, outputs[o])
	}
	a.WriterKeys = strings.Join(arns, ",")
	if a.fromOutput == nil {
		a.fromOutput = map[string]string{}
	}
	a.fromOutput["writer-keys"] = strings.Join(stackoutputs.WriterKeys(), ",")
}

// writerKeyList parses --writer-keys: three keys, ingest's, redrive's and
// the sweeper's, comma-separated.
func (a *App) writerKeyList() ([]string, error) {
	parts := strings.Split(a.WriterKeys, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	if len(parts) != len(writerproof.Roles) || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, &UsageError{fmt.Errorf("--writer-keys %q: want three KMS keys, ingest,redrive,sweeper (the stack's %s)", a.WriterKeys, strings.Join(stackoutputs.WriterKeys(), ", "))}
	}
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p] {
			return nil, &UsageError{fmt.Errorf("--writer-keys %q: %s given twice (each role has its own key)", a.WriterKeys, p)}
		}
		seen[p] = true
	}
	return parts, nil
}

// isKeyARN reports whether id is a KMS key ARN (what a writer proof names:
// GenerateMac's KeyId), not an alias or a bare key id.
func isKeyARN(id string) bool {
	return strings.HasPrefix(id, "arn:") && strings.Contains(id, ":key/")
}

// writerCheck is ledger.Input.CheckWriter for the configured writer keys
// and a note saying what was checked. c nil is verify --offline:
// VerifyMac needs KMS, so the MACs are not checked (said in the note) but
// a version with no proof, a proof under another key or of the wrong
// role is still named. Without writer keys nothing is checked
// (addWriterKeys names it when the signed digests say writer proofs are
// on). Online
// a key given by alias or id is resolved to its ARN with DescribeKey;
// offline it must be an ARN.
func (a *App) writerCheck(ctx context.Context, c *Clients) (func(prev, next ledger.Item) error, string, error) {
	a.writerARNs, a.writerMACs = nil, nil
	if strings.TrimSpace(a.WriterKeys) == "" {
		return nil, "", nil
	}
	ids, err := a.writerKeyList()
	if err != nil {
		return nil, "", err
	}
	keys := writerproof.Keys{}
	for i, id := range ids {
		if !isKeyARN(id) {
			if c == nil || c.Clients == nil || c.KMS == nil {
				return nil, "", &UsageError{fmt.Errorf("--writer-keys: %s is not a key ARN (offline, give the keys' ARNs)", id)}
			}
			out, err := c.KMS.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(id)})
			if err != nil {
				return nil, "", fmt.Errorf("writer key %s (--writer-keys): %w", id, err)
			}
			id = aws.ToString(out.KeyMetadata.Arn)
		}
		keys[id] = writerproof.Roles[i]
		a.writerARNs = append(a.writerARNs, id)
	}
	if c == nil {
		return dynamostore.LedgerWriterCheck(ctx, keys, nil),
			"offline: writer proofs' MACs are not checked (VerifyMac needs KMS: run verify online for them); versions without a proof, or proved by another key or role, are named", nil
	}
	if c.Clients == nil || c.KMS == nil {
		return nil, "", errors.New("no KMS client to verify writer proofs with")
	}
	a.writerMACs = &macCache{verify: kmsmac.Verifier{API: c.KMS}.Verify}
	return dynamostore.LedgerWriterCheck(ctx, keys, a.writerMACs.Verify), "", nil
}

// addWriterKeys checks the writer keys given (keyARNs, resolved by
// writerCheck; nil: none) against the newest signed digest's
// (ledger.CheckWriterKeys) and merges the result into res (after
// addLedger): keys that are not those the ledger was deployed with, or
// none given while the signed digests say writer proofs are on, are a
// problem, not a note.
func (res *VerifyResult) addWriterKeys(in ledger.Input, keyARNs []string) {
	l := res.Ledger
	if l == nil {
		return
	}
	ps, note := ledger.CheckWriterKeys(in.Digests, in.PublicKeyDER, keyARNs)
	for _, p := range ps {
		what := string(p.Kind) + ": " + p.Detail
		if keyARNs == nil {
			what += " (give them: --writer-keys, DLQQ_WRITER_KEYS, or the stack's " + strings.Join(stackoutputs.WriterKeys(), ", ") + ")"
		}
		res.Problems = append(res.Problems, Problem{ID: p.Subject, Kind: string(p.Kind), What: what})
		l.Problems++
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
}

// macCache verifies each (key, message, MAC) once: all the versions of a
// batch share their root's MAC, so a ledger costs one VerifyMac per
// batch. Concurrent asks for the same one wait for the first.
//
// From a checkpoint (useProofs), a MAC an earlier run verified is not
// asked again: VerifyMac's answer for the same key, message and MAC is
// a pure function of the key's material, which KMS never changes for a
// key's ARN (an HMAC key has no rotation, and imported material can only
// be imported again as it was). What does change is whether KMS answers
// at all (a key disabled or scheduled for deletion, a grant or a policy
// withdrawn), which a run without the checkpoint fails on: so each key's
// first proven MAC of a run is asked all the same, and any with a chance
// of 1 in CheckpointResample, and a proof is kept only if KMS says so
// again.
type macCache struct {
	verify writerproof.VerifyMAC
	mu     sync.Mutex
	seen   map[string]*macAnswer
	// proofs are the checkpoint's (nil: none); asked are the keys one of
	// whose proven MACs this run asked KMS; resampled picks the others
	// asked all the same; skipped counts the MACs not asked.
	proofs    *ledger.Proofs
	asked     map[string]bool
	resampled func() bool
	skipped   atomic.Int64
}

type macAnswer struct {
	once sync.Once
	ok   bool
	err  error
}

// useProofs takes the checkpoint's proofs, before the first Verify.
func (m *macCache) useProofs(cp *checkpoint) {
	if m == nil || cp == nil {
		return
	}
	m.proofs, m.asked, m.resampled = cp.proofs, map[string]bool{}, cp.resampled
	cp.macs = m
}

// skippedCount is how many MACs a proof spared asking KMS.
func (m *macCache) skippedCount() int64 {
	if m == nil {
		return 0
	}
	return m.skipped.Load()
}

// Verify implements writerproof.VerifyMAC.
func (m *macCache) Verify(ctx context.Context, keyARN string, msg, mac []byte) (bool, error) {
	k := keyARN + "\x00" + string(msg) + "\x00" + string(mac)
	m.mu.Lock()
	if m.seen == nil {
		m.seen = map[string]*macAnswer{}
	}
	ans, ok := m.seen[k]
	if !ok {
		ans = &macAnswer{}
		m.seen[k] = ans
	}
	m.mu.Unlock()
	ans.once.Do(func() { ans.ok, ans.err = m.ask(ctx, keyARN, msg, mac) })
	return ans.ok, ans.err
}

// ask is VerifyMac, unless an earlier run's proof spares it.
func (m *macCache) ask(ctx context.Context, keyARN string, msg, mac []byte) (bool, error) {
	if m.proofs == nil {
		return m.verify(ctx, keyARN, msg, mac)
	}
	proof := m.proofs.Key("writer-mac", []byte(keyARN), msg, mac)
	if m.proofs.Holds(proof) && !m.askAllTheSame(keyARN) {
		m.proofs.Known(proof)
		m.skipped.Add(1)
		return true, nil
	}
	ok, err := m.verify(ctx, keyARN, msg, mac)
	if ok && err == nil {
		m.proofs.Passed(proof)
	}
	return ok, err
}

// askAllTheSame reports whether a proven MAC under keyARN is asked of KMS
// all the same: the key's first of the run, and any at random.
func (m *macCache) askAllTheSame(keyARN string) bool {
	m.mu.Lock()
	first := !m.asked[keyARN]
	m.asked[keyARN] = true
	m.mu.Unlock()
	return first || m.resampled()
}
