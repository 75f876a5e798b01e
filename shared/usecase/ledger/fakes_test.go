package ledger

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/testkeys"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

var errLost = errors.New("connection reset (the answer was lost)")

// memObjects is the bucket in memory. afterPut, when set, runs after a
// write (applied) and its error is returned as the write's; beforePut runs
// before one.
type memObjects struct {
	mu        sync.Mutex
	objs      map[string][]byte
	puts      int
	beforePut func(key string)
	afterPut  func(key string) error
	putErr    func(key string) error // refused before being applied
	// versions and markers add object versions and delete markers to a
	// key (a versioned bucket's second version, a delete marker newer
	// than the first version, as Versions counts them): the current one
	// is what Get and List still show.
	versions map[string]int
	markers  map[string]int
	// gets counts the Gets; getErr, when set, fails a Get (a 503).
	gets   int
	getErr func(key string) error
}

func newObjects() *memObjects { return &memObjects{objs: map[string][]byte{}} }

func (m *memObjects) PutIfAbsent(_ context.Context, key string, body []byte, retainUntil time.Time) error {
	if m.beforePut != nil {
		m.beforePut(key)
	}
	m.mu.Lock()
	if m.putErr != nil {
		if err := m.putErr(key); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	if _, ok := m.objs[key]; ok {
		m.mu.Unlock()
		return dl.ErrExists
	}
	if retainUntil.IsZero() {
		m.mu.Unlock()
		return errors.New("no retention")
	}
	m.objs[key] = slices.Clone(body)
	m.puts++
	after := m.afterPut
	m.mu.Unlock()
	if after != nil {
		return after(key)
	}
	return nil
}

func (m *memObjects) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	if m.getErr != nil {
		if err := m.getErr(key); err != nil {
			return nil, err
		}
	}
	b, ok := m.objs[key]
	if !ok {
		return nil, dl.ErrNotFound
	}
	return slices.Clone(b), nil
}

func (m *memObjects) List(_ context.Context, prefix, startAfter string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func (m *memObjects) Versions(_ context.Context, key string) (int, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.versions[key]
	if _, ok := m.objs[key]; ok {
		n++
	}
	return n, m.markers[key], nil
}

// addVersion gives key one more version (behind the current one) or, with
// marker, a delete marker.
func (m *memObjects) addVersion(key string, marker bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.versions == nil {
		m.versions, m.markers = map[string]int{}, map[string]int{}
	}
	if marker {
		m.markers[key]++
	} else {
		m.versions[key]++
	}
}

func (m *memObjects) under(prefix string) map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// memState holds the ledger's items in memory, with the same conditions
// as the DynamoDB adapter. afterAdvance/afterDigest run after an applied
// write and their error is returned; failAdvance/failDigest refuse one
// before it is applied (a crash between the PUT and the update).
type memState struct {
	mu           sync.Mutex
	heads        map[string]Head
	digest       *DigestHead
	writes       int
	afterAdvance func() error
	failAdvance  func() error
	afterDigest  func() error
	failDigest   func() error
}

func newState() *memState { return &memState{heads: map[string]Head{}} }

func (m *memState) Head(_ context.Context, shard string) (Head, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[shard]
	return h, ok, nil
}

func (m *memState) Heads(_ context.Context, shards []string) (map[string]Head, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Head{}
	for _, s := range shards {
		if h, ok := m.heads[s]; ok {
			out[s] = h
		}
	}
	return out, nil
}

func (m *memState) AdvanceHead(_ context.Context, h Head, prevSegmentKey string, pendingSince time.Time) error {
	m.mu.Lock()
	if m.failAdvance != nil {
		if err := m.failAdvance(); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	cur, ok := m.heads[h.Shard]
	if (prevSegmentKey == "" && ok) || (prevSegmentKey != "" && (!ok || cur.SegmentKey != prevSegmentKey)) {
		m.mu.Unlock()
		return dl.ErrConflict
	}
	h.PendingSince = pendingSince
	if ok && !cur.PendingSince.IsZero() {
		h.PendingSince = cur.PendingSince
	}
	h.AnchoredSeq = cur.AnchoredSeq
	m.heads[h.Shard] = h
	m.writes++
	after := m.afterAdvance
	m.mu.Unlock()
	if after != nil {
		return after()
	}
	return nil
}

func (m *memState) MarkAnchored(_ context.Context, shard, segmentKey, lastSeq string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[shard]
	if !ok || h.SegmentKey != segmentKey {
		return dl.ErrConflict
	}
	h.AnchoredSeq, h.PendingSince = lastSeq, time.Time{}
	m.heads[shard] = h
	m.writes++
	return nil
}

func (m *memState) DigestHead(context.Context) (DigestHead, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.digest == nil {
		return DigestHead{}, false, nil
	}
	return *m.digest, true, nil
}

func (m *memState) PutDigestHead(_ context.Context, d DigestHead, prevN int64) error {
	m.mu.Lock()
	if m.failDigest != nil {
		if err := m.failDigest(); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	if (prevN == 0 && m.digest != nil) || (prevN != 0 && (m.digest == nil || m.digest.N != prevN)) {
		m.mu.Unlock()
		return dl.ErrConflict
	}
	m.digest = &d
	m.writes++
	after := m.afterDigest
	m.mu.Unlock()
	if after != nil {
		return after()
	}
	return nil
}

type keySigner struct {
	key *ecdsa.PrivateKey
	der []byte
}

func newSigner(t testing.TB) *keySigner {
	t.Helper()
	k, der := testkeys.ECDSA(t)
	return &keySigner{key: k, der: der}
}

func (k *keySigner) Sign(_ context.Context, h [32]byte) ([]byte, error) {
	return ecdsa.SignASN1(rand.Reader, k.key, h[:])
}
func (k *keySigner) KeyID() string                             { return "arn:aws:kms:us-east-1:000000000000:key/test" }
func (k *keySigner) Algorithm() string                         { return dl.AlgECDSA }
func (k *keySigner) PublicKey(context.Context) ([]byte, error) { return k.der, nil }

type shardList []string

// Shards: each shard's parent is the one before it in the list.
func (s shardList) Shards(context.Context) (map[string]string, error) {
	out := map[string]string{}
	for i, id := range s {
		out[id] = ""
		if i > 0 {
			out[id] = s[i-1]
		}
	}
	return out, nil
}

const streamARN = "arn:aws:dynamodb:us-east-1:000000000000:table/q/stream/2026-12-01T00:00:00.000"

// stream generates a table's changes and keeps the table they leave.
type stream struct {
	seq   int64
	at    time.Time
	table map[string]map[string]events.DynamoDBAttributeValue
	recs  map[string][]events.DynamoDBEventRecord // by shard, in order
}

func newStream() *stream {
	return &stream{seq: 4100000000000000000, at: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		table: map[string]map[string]events.DynamoDBAttributeValue{}, recs: map[string][]events.DynamoDBEventRecord{}}
}

func image(id string, v int64) map[string]events.DynamoDBAttributeValue {
	img := map[string]events.DynamoDBAttributeValue{
		"dlq_id": events.NewStringAttribute(id), "version": events.NewNumberAttribute(strconv.FormatInt(v, 10)),
		"seal": events.NewStringAttribute("seal-" + id + "-" + strconv.FormatInt(v, 10)), "status": events.NewStringAttribute("OPEN"),
	}
	if v > 1 {
		img["prev_seal"] = events.NewStringAttribute("seal-" + id + "-" + strconv.FormatInt(v-1, 10))
	}
	return img
}

// write appends a change of id (to version v) on shard.
func (s *stream) write(shard, id string, v int64) {
	s.seq += 13
	s.at = s.at.Add(time.Second)
	old, had := s.table[id]
	r := events.DynamoDBEventRecord{EventName: dl.EventInsert, EventSourceArn: streamARN, Change: events.DynamoDBStreamRecord{
		Keys: map[string]events.DynamoDBAttributeValue{"dlq_id": events.NewStringAttribute(id)}, SequenceNumber: strconv.FormatInt(s.seq, 10) + "00",
		ApproximateCreationDateTime: events.SecondsEpochTime{Time: s.at}, NewImage: image(id, v), StreamViewType: "NEW_AND_OLD_IMAGES"}}
	if had {
		r.EventName, r.Change.OldImage = dl.EventModify, old
	}
	s.table[id] = r.Change.NewImage
	s.recs[shard] = append(s.recs[shard], r)
}

// many writes n changes on shard: new records and second versions.
func (s *stream) many(shard string, n int) {
	for i := range n {
		id := "src#" + shard + "-" + strconv.Itoa(i/2)
		s.write(shard, id, int64(i%2+1))
	}
}

func batch(shard string, recs []events.DynamoDBEventRecord) events.DynamoDBTimeWindowEvent {
	return events.DynamoDBTimeWindowEvent{DynamoDBEvent: events.DynamoDBEvent{Records: slices.Clone(recs)},
		TimeWindowProperties: events.TimeWindowProperties{ShardID: shard, EventSourceARN: streamARN, State: map[string]string{}}}
}

type rig struct {
	t       testing.TB
	objects *memObjects
	state   *memState
	signer  *keySigner
	svc     *Service
	now     time.Time
}

func newRig(t testing.TB, shards ...string) *rig {
	t.Helper()
	r := &rig{t: t, objects: newObjects(), state: newState(), signer: newSigner(t), now: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)}
	r.svc = r.service(shards...)
	return r
}

// service is another instance of the function on the rig's bucket and
// table (a concurrent run).
func (r *rig) service(shards ...string) *Service {
	return &Service{Objects: r.objects, State: r.state, Signer: r.signer, Shards: shardList(shards), Decode: dynamostore.LedgerItemFromStream,
		Now: func() time.Time { return r.now }, Config: Config{StreamARN: streamARN, Retention: 24 * time.Hour, DigestMaxAge: DefaultDigestMaxAge}}
}

func (r *rig) handle(ev events.DynamoDBTimeWindowEvent) events.DynamoDBTimeWindowEventResponse {
	r.t.Helper()
	resp, err := r.svc.HandleStream(context.Background(), ev)
	if err != nil {
		r.t.Fatalf("HandleStream: %v", err)
	}
	if resp.State == nil {
		r.t.Fatal("a response without state (Lambda counts it as a failure)")
	}
	return resp
}

// exact checks that every change of s is in the ledger once (late ones
// after the head they came behind) and that Verify finds nothing.
func (r *rig) exact(s *stream) {
	r.t.Helper()
	segs := r.objects.under(dl.SegmentPrefix)
	for shard, recs := range s.recs {
		var got []string
		h, ok := r.state.heads[shard]
		if !ok {
			r.t.Fatalf("shard %s has no head", shard)
		}
		for key := h.SegmentKey; key != ""; {
			seg, err := dl.ParseSegment(segs[key])
			if err != nil {
				r.t.Fatalf("segment %s: %v", key, err)
			}
			var seqs []string
			for _, e := range seg.Entries {
				seqs = append(seqs, e.Seq)
			}
			got = append(seqs, got...)
			key = ""
			if seg.Prev != nil {
				key = seg.Prev.Key
			}
		}
		var want []string
		for _, rec := range recs {
			want = append(want, rec.Change.SequenceNumber)
		}
		// A late change (a retry out of order) sits in a later segment
		// than its seq: each change once, in any segment, is exact.
		slices.SortFunc(got, dl.SeqCompare)
		if !slices.Equal(got, want) {
			r.t.Fatalf("shard %s ledgered %d changes %v,\nwant %d %v", shard, len(got), got, len(want), want)
		}
	}
	in := dl.Input{Segments: segs, Digests: r.objects.under(dl.DigestPrefix), PublicKeyDER: r.signer.der, Now: r.now}
	for _, img := range s.table {
		it, err := dynamostore.LedgerItemFromStream(img)
		if err != nil {
			r.t.Fatal(err)
		}
		in.Items = append(in.Items, it)
	}
	if res := dl.Verify(in); !res.OK() {
		r.t.Fatalf("verify: %v", res.Problems)
	}
}

// oneShard is most tests' start: a stream of n changes on shard-1, a rig
// that ledgers shard-1, and the shard's changes in order.
func oneShard(t testing.TB, n int) (*stream, *rig, []events.DynamoDBEventRecord) {
	t.Helper()
	s := newStream()
	s.many("shard-1", n)
	return s, newRig(t, "shard-1"), s.recs["shard-1"]
}
