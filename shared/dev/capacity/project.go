package capacity

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// The limits the projection uses (docs/operations.md "Storm capacity"
// cites each).
const (
	// PartitionWCU is the most write units per second one partition
	// takes, of the table or of an index; one partition key value never
	// spreads over more than one partition for its writes.
	PartitionWCU = 1000
	// TableQuotaWRU is the default on-demand quota of write request units
	// per second, per table (and per index).
	TableQuotaWRU = 40000
	// InitialPartitions is the fewest partitions an on-demand table has:
	// a new one serves 4,000 writes a second, at most 1,000 WCU/s each.
	InitialPartitions = 4
)

// Prices (us-east-1, the ones docs/operations.md "What it costs" uses).
const (
	pricePerMWRU      = 0.625
	pricePerMRRU      = 0.125
	pricePerGBs       = 0.0000133334
	pricePerMRequests = 0.20
	pricePerKS3Put    = 0.005
	pricePer10KKMS    = 0.03
	pricePerKS3Get    = 0.0004
	pricePerMSQS      = 0.40
)

// Limit is one limit's projection.
type Limit struct {
	// Name says what binds it.
	Name string
	// Rate is the sustained messages per second it allows (+Inf: it
	// scales with the table and never binds first).
	Rate float64
	// Detail explains the figure.
	Detail string
}

// Key is a partition key's load per message.
type Key struct {
	Target, Key string
	// PerMessage is its write units per dead-lettered message.
	PerMessage float64
	// Keys is how many partition keys its target was written on.
	Keys int
}

// Projection is what a storm's measurements project for one table.
type Projection struct {
	Messages int
	// Hottest keys, hottest first (table and each index).
	Hottest []Key
	Limits  []Limit
	// N is the sustained rate, Binding the limit that sets it.
	N       int
	Binding string

	// Per message: write units of the table and the indexes, by phase.
	IngestTableWCU, IngestIndexWCU, LedgerTableWCU, LedgerIndexWCU float64
	// StreamRecords per message (the table's changes: one stream record
	// each, the ledger's own counters included).
	StreamRecords float64
	// IngestDuration is the mean invocation; IngestMsgsPerSecond one
	// concurrent invocation's rate (messages ÷ busy time).
	IngestDuration      time.Duration
	IngestPerInvocation float64
	IngestMsgsPerSecond float64
	// Ledger: per full batch.
	BatchRecords    float64
	BatchSkipped    float64 // the ledger's own changes in it
	BatchDuration   time.Duration
	BatchSegment    float64 // bytes of its segment PUT
	BatchTxnItems   float64
	BatchTxnWCU     float64
	BatchIndexWCU   float64
	BatchOtherWCU   float64
	ShardRecordsSec float64 // one shard's ledger throughput, records/s
	AnchoringLag    time.Duration
	Shards          int
	CostLines       []string
	// Retired is the projection without the writes of the index the
	// template keeps only until a migration drops it (Result.Retiring);
	// nil: none.
	Retired *Projection
}

// Without is r without the writes to index (its items' and batches').
func (r *Result) Without(index string) *Result {
	keep := func(ws []Write) []Write {
		return slices.DeleteFunc(slices.Clone(ws), func(w Write) bool { return w.Target == index })
	}
	out := *r
	out.Retiring = ""
	out.Layout.Indexes = slices.DeleteFunc(slices.Clone(r.Layout.Indexes), func(ix Index) bool { return ix.Name == index })
	out.IngestWrites, out.LedgerWrites = keep(r.IngestWrites), keep(r.LedgerWrites)
	out.Batches = slices.Clone(r.Batches)
	for i := range out.Batches {
		out.Batches[i].Writes = keep(out.Batches[i].Writes)
	}
	return &out
}

// Project computes the projection from a storm's result.
func Project(r *Result) Projection {
	p := Projection{Messages: r.Options.Messages}
	m := float64(p.Messages)
	byKey := map[[2]string]int{}
	var tableUnits, streamRecords int
	for _, ws := range [][]Write{r.IngestWrites, r.LedgerWrites} {
		for _, w := range ws {
			byKey[[2]string{w.Target, w.Key}] += w.Units
			if w.Target == TableTarget {
				tableUnits += w.Units
				if w.Changed {
					streamRecords++
				}
			}
		}
	}
	sum := func(ws []Write, table bool) float64 {
		n := 0
		for _, w := range ws {
			if (w.Target == TableTarget) == table {
				n += w.Units
			}
		}
		return float64(n) / m
	}
	p.IngestTableWCU, p.IngestIndexWCU = sum(r.IngestWrites, true), sum(r.IngestWrites, false)
	p.LedgerTableWCU, p.LedgerIndexWCU = sum(r.LedgerWrites, true), sum(r.LedgerWrites, false)
	p.StreamRecords = float64(streamRecords) / m
	// The hottest key of the table and of each index.
	hottest := map[string]Key{}
	perTarget := map[string]float64{}
	keys := map[string]int{}
	for k, u := range byKey {
		per := float64(u) / m
		perTarget[k[0]] += per
		keys[k[0]]++
		if h, ok := hottest[k[0]]; !ok || per > h.PerMessage || (per == h.PerMessage && k[1] < h.Key) {
			hottest[k[0]] = Key{Target: k[0], Key: k[1], PerMessage: per}
		}
	}
	for t, k := range hottest {
		k.Keys = keys[t]
		p.Hottest = append(p.Hottest, k)
	}
	slices.SortFunc(p.Hottest, func(a, b Key) int {
		if a.PerMessage != b.PerMessage {
			if a.PerMessage > b.PerMessage {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Target, b.Target)
	})

	// 1. Partitions: the hottest partition key of the table or an index
	// (a throttled index partition throttles the table's writes).
	if len(p.Hottest) > 0 {
		h := p.Hottest[0]
		p.Limits = append(p.Limits, Limit{Name: "partition key " + quote(h.Key) + " of " + targetName(h.Target), Rate: PartitionWCU / h.PerMessage,
			Detail: fmt.Sprintf("%s WCU per message on it, %d WCU/s per partition key", f2(h.PerMessage), PartitionWCU)})
	}
	// 2. The table's (and each index's) on-demand quota.
	quotaTarget, quotaPer := "", 0.0
	for t, per := range perTarget {
		if per > quotaPer || (per == quotaPer && t < quotaTarget) {
			quotaTarget, quotaPer = t, per
		}
	}
	if quotaPer > 0 {
		p.Limits = append(p.Limits, Limit{Name: "the on-demand throughput quota of " + targetName(quotaTarget), Rate: TableQuotaWRU / quotaPer,
			Detail: fmt.Sprintf("%s WRU per message, %d WRU/s default quota", f2(quotaPer), TableQuotaWRU)})
	}
	// 3. The stream and the ledger: one invocation per shard at a time.
	var recs, busy, txnItems, txnWCU, indexWCU, otherWCU float64
	full := 0
	for _, b := range r.Batches {
		recs += float64(b.Records + b.Skipped)
		busy += b.Duration.Seconds()
		if (b.Records+b.Skipped)*10 >= r.LedgerBatchSize*9 {
			full++
			p.BatchRecords += float64(b.Records)
			p.BatchSkipped += float64(b.Skipped)
			p.BatchDuration += b.Duration
			p.BatchSegment += float64(b.Calls.S3PutBytes)
			for _, w := range b.Writes {
				switch {
				case w.Target != TableTarget:
					indexWCU += float64(w.Units)
				case w.Transactional:
					txnItems++
					txnWCU += float64(w.Units)
				default:
					otherWCU += float64(w.Units)
				}
			}
		}
	}
	if full > 0 {
		n := float64(full)
		p.BatchRecords /= n
		p.BatchSkipped /= n
		p.BatchDuration = time.Duration(float64(p.BatchDuration) / n)
		p.BatchSegment, p.BatchTxnItems, p.BatchTxnWCU, p.BatchIndexWCU, p.BatchOtherWCU = p.BatchSegment/n, txnItems/n, txnWCU/n, indexWCU/n, otherWCU/n
	}
	if busy > 0 {
		p.ShardRecordsSec = recs / busy * float64(max(r.LedgerParallel, 1))
	}
	wTable := float64(tableUnits) / m
	ledger := Limit{Name: "the ledger's stream shards"}
	// A shard carries one partition's changes; a saturated partition
	// writes PartitionWCU/(units per change) changes a second. The table
	// has at least InitialPartitions partitions, more as its writes need.
	perPartition := 0.0
	if streamRecords > 0 {
		perPartition = PartitionWCU / (float64(tableUnits) / float64(streamRecords))
	}
	switch {
	case p.ShardRecordsSec <= 0 || p.StreamRecords <= 0:
		ledger.Rate, ledger.Detail = 0, "no ledger batch measured"
	case p.ShardRecordsSec >= perPartition:
		ledger.Rate = math.Inf(1)
		ledger.Detail = fmt.Sprintf("keeps up at any rate: one shard's ledger takes %s changes/s, a saturated partition writes %s", f0(p.ShardRecordsSec), f0(perPartition))
	default:
		ledger.Rate = InitialPartitions * p.ShardRecordsSec / p.StreamRecords
		ledger.Detail = fmt.Sprintf("%d shards × %s changes/s ÷ %s changes per message; a saturated partition writes %s changes/s, more than one shard's ledger takes",
			InitialPartitions, f0(p.ShardRecordsSec), f2(p.StreamRecords), f0(perPartition))
	}
	p.Limits = append(p.Limits, ledger)
	// 4. Lambda: the DLQ mapping's concurrency × a batch ÷ its duration.
	var invMsgs int
	var invBusy time.Duration
	for _, inv := range r.Invocations {
		invMsgs += inv.Messages
		invBusy += inv.Duration
	}
	if len(r.Invocations) > 0 && invBusy > 0 {
		p.IngestDuration = invBusy / time.Duration(len(r.Invocations))
		p.IngestPerInvocation = float64(invMsgs) / float64(len(r.Invocations))
		p.IngestMsgsPerSecond = float64(invMsgs) / invBusy.Seconds()
		p.Limits = append(p.Limits, Limit{Name: fmt.Sprintf("IngestMaxConcurrency %d, the DLQ mapping's MaximumConcurrency", r.MappingConcurrency),
			Rate:   float64(r.MappingConcurrency) * p.IngestMsgsPerSecond,
			Detail: fmt.Sprintf("%d × %s messages per invocation ÷ %s mean duration", r.MappingConcurrency, f1(p.IngestPerInvocation), msf(p.IngestDuration))})
	}
	p.N, p.Binding = math.MaxInt, "nothing measured"
	best := math.Inf(1)
	for _, l := range p.Limits {
		if l.Rate < best {
			best, p.Binding = l.Rate, l.Name
		}
	}
	if !math.IsInf(best, 1) {
		p.N = int(math.Floor(best))
	}
	// Shards at N: the fewest partitions that take the table's writes.
	p.Shards = max(InitialPartitions, int(math.Ceil(float64(p.N)*wTable/PartitionWCU)))
	if p.ShardRecordsSec > 0 {
		interval := scheduleInterval(r.DigestSchedule)
		rho := float64(p.N) * p.StreamRecords / float64(p.Shards) / p.ShardRecordsSec
		wait := time.Duration(float64(p.BatchDuration) / math.Max(1-rho, 0.01))
		p.AnchoringLag = wait + interval + r.Digest
	}
	p.CostLines = costs(r, p)
	if r.Retiring != "" {
		q := Project(r.Without(r.Retiring))
		p.Retired = &q
	}
	return p
}

func quote(s string) string { return "'" + s + "'" }

func targetName(t string) string {
	if t == TableTarget {
		return "the table"
	}
	return "index " + t
}

// msf is a duration in milliseconds, one decimal.
func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

// scheduleInterval reads rate(N minutes|hours); 5 minutes otherwise.
func scheduleInterval(expr string) time.Duration {
	var n int
	var unit string
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(expr, "rate("), ")"), "%d %s", &n, &unit); err == nil && n > 0 {
		switch strings.TrimSuffix(unit, "s") {
		case "minute":
			return time.Duration(n) * time.Minute
		case "hour":
			return time.Duration(n) * time.Hour
		}
	}
	return 5 * time.Minute
}

// costs is what a million dead-lettered messages cost, from the run's
// measurements.
func costs(r *Result, p Projection) []string {
	m := float64(p.Messages)
	const million = 1e6
	wru := p.IngestTableWCU + p.IngestIndexWCU + p.LedgerTableWCU + p.LedgerIndexWCU
	// The ledger on AWS: a batch of BatchSize changes of the stream,
	// whose changes (StreamRecords per message) include the ledger's own
	// counters, which the emulator's stream leaves out (EMULATORS.md:
	// TransactWriteItems makes no stream records there). Each batch costs
	// what a measured batch does: an upper bound, since a change of the
	// ledger's own is skipped at no cost.
	batchesPerMsg := p.StreamRecords / float64(max(r.LedgerBatchSize, 1))
	ledgerInv, ledgerGBs := batchesPerMsg, 0.0
	if p.ShardRecordsSec > 0 {
		ledgerGBs = p.StreamRecords / p.ShardRecordsSec * float64(r.LedgerMemoryMB) / 1024
	}
	ingestGBs := p.IngestDuration.Seconds() * float64(len(r.Invocations)) / m * float64(r.IngestMemoryMB) / 1024
	ingestInv := float64(len(r.Invocations)) / m
	var s3Puts, s3Lists float64
	for _, b := range r.Batches {
		s3Puts += float64(b.Calls.Ops["s3 PutObject"])
		s3Lists += float64(b.Calls.Ops["s3 ListObjectsV2"] + b.Calls.Ops["s3 GET"])
	}
	if nb := float64(len(r.Batches)); nb > 0 {
		s3Puts, s3Lists = s3Puts/nb*batchesPerMsg, s3Lists/nb*batchesPerMsg
	}
	macs := float64(r.IngestCalls.Ops["kms GenerateMac"]) / m
	lines := []string{
		fmt.Sprintf("DynamoDB writes: %s WRU per message (ingest %s + %s indexes, ledger counters and state %s + %s indexes) = $%.2f",
			f2(wru), f2(p.IngestTableWCU), f2(p.IngestIndexWCU), f2(p.LedgerTableWCU), f2(p.LedgerIndexWCU), wru*million*pricePerMWRU/million),
		fmt.Sprintf("Lambda ingest: %s invocations, %s GB-s at %d MB = $%.2f", f0(ingestInv*million), f0(ingestGBs*million), r.IngestMemoryMB,
			ingestGBs*million*pricePerGBs+ingestInv*pricePerMRequests),
		fmt.Sprintf("Lambda ledger: %s invocations, %s GB-s at %d MB = $%.2f", f0(ledgerInv*million), f0(ledgerGBs*million), r.LedgerMemoryMB,
			ledgerGBs*million*pricePerGBs+ledgerInv*pricePerMRequests),
		fmt.Sprintf("S3: %s segment PUTs and %s LIST/GET requests (ledger batches) = $%.2f", f0(s3Puts*million), f0(s3Lists*million), (s3Puts+s3Lists)*million/1000*pricePerKS3Put),
		fmt.Sprintf("KMS: %s GenerateMac (ingest's writer proofs) = $%.2f; Sign: %d per digest run, not per message",
			f0(macs*million), macs*million/10000*pricePer10KKMS, r.DigestCalls.Ops["kms Sign"]),
	}
	return lines
}

// Print writes the run's figures and, last, the projection's line.
func (p Projection) Print(w io.Writer, r *Result) {
	o := r.Options
	fmt.Fprintf(w, "storm: %d messages from %d sources (%s takes %.0f %%; %d FIFO, %d standard), bodies of %d bytes, %.0f %% failing the schema\n",
		o.Messages, o.Sources, r.Hot, 100*o.HotShare, r.FIFOSources, o.Sources-r.FIFOSources, r.BodyBytes, 100*o.InvalidShare)
	fmt.Fprintf(w, "latency model (assumed median per call): %s\n", describe(o.Model))
	if r.Unmodelled != "" {
		fmt.Fprintf(w, "calls without a latency in the model (they took none: the durations are short): %s\n", r.Unmodelled)
	}
	fmt.Fprintf(w, "indexes (from infra/template.yaml): %s\n", indexes(r.Layout))
	fmt.Fprintf(w, "write units per message: ingest table %s, indexes %s; ledger table %s, indexes %s\n",
		f2(p.IngestTableWCU), f2(p.IngestIndexWCU), f2(p.LedgerTableWCU), f2(p.LedgerIndexWCU))
	fmt.Fprintf(w, "ingest's record writes: %s\n", histogram(r.IngestWrites))
	for _, k := range p.Hottest {
		fmt.Fprintf(w, "hottest partition key of %s: %s, %s WCU per message (of %d keys written)\n", targetName(k.Target), quote(k.Key), f2(k.PerMessage), k.Keys)
	}
	fmt.Fprintf(w, "ingest: %d invocations of %s messages on average, mean duration %s (%s messages/s per concurrent invocation)\n",
		len(r.Invocations), f1(p.IngestPerInvocation), msf(p.IngestDuration), f0(p.IngestMsgsPerSecond))
	for _, fifo := range []bool{false, true} {
		var n int
		var d time.Duration
		for _, inv := range r.Invocations {
			if inv.FIFO == fifo {
				n, d = n+1, d+inv.Duration
			}
		}
		if n > 0 {
			kind := "standard"
			if fifo {
				kind = "FIFO"
			}
			fmt.Fprintf(w, "ingest from %s queues: %d invocations, mean duration %s\n", kind, n, msf(d/time.Duration(n)))
		}
	}
	fmt.Fprintf(w, "ingest calls per message: %s\n", perMessage(r.IngestCalls, p.Messages))
	fmt.Fprintf(w, "ledger: %d batches (mapping batch size %d, ParallelizationFactor %d); a full batch: %s record changes and %s of its own, %s, segment PUT %s bytes, counters transaction %s items = %s WCU, index entries %s WCU, other writes %s WCU\n",
		len(r.Batches), r.LedgerBatchSize, r.LedgerParallel, f0(p.BatchRecords), f0(p.BatchSkipped), msf(p.BatchDuration), f0(p.BatchSegment),
		f1(p.BatchTxnItems), f1(p.BatchTxnWCU), f1(p.BatchIndexWCU), f1(p.BatchOtherWCU))
	fmt.Fprintf(w, "stream: %s changes per message (every table change, the ledger's own included); one shard's ledger takes %s changes/s\n",
		f2(p.StreamRecords), f0(p.ShardRecordsSec))
	fmt.Fprintf(w, "digest run: %s (%s), schedule %s\n", msf(r.Digest), r.DigestCalls, r.DigestSchedule)
	for _, l := range p.Limits {
		rate := "unbounded"
		if !math.IsInf(l.Rate, 1) {
			rate = fmt.Sprintf("%.0f msgs/s", math.Floor(l.Rate))
		}
		fmt.Fprintf(w, "limit: %s: %s (%s)\n", l.Name, rate, l.Detail)
	}
	fmt.Fprintf(w, "at %d msgs/s: at least %d stream shards; anchoring lag up to %.0f s (a batch, then the next digest run)\n", p.N, p.Shards, p.AnchoringLag.Seconds())
	for _, c := range p.CostLines {
		fmt.Fprintf(w, "per million messages: %s\n", c)
	}
	fmt.Fprintf(w, "run: %.0f s on this machine%s\n", r.Elapsed.Seconds(), r.Load)
	if q := p.Retired; q != nil {
		fmt.Fprintf(w, "without index %s (step 3 of the move to the source index drops it): %d msgs/s per table (limited by %s)\n", r.Retiring, q.N, q.Binding)
	}
	fmt.Fprintf(w, "projected sustained ingest: %d msgs/s per table (limited by %s)\n", p.N, p.Binding)
}

// histogram counts the table writes by their units.
func histogram(ws []Write) string {
	by := map[int]int{}
	total := 0
	for _, w := range ws {
		if w.Target == TableTarget {
			by[w.Units]++
			total++
		}
	}
	var parts []string
	for _, u := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%.0f %% of %d WCU", 100*float64(by[u])/float64(total), u))
	}
	return strings.Join(parts, ", ")
}

func indexes(l Layout) string {
	if len(l.Indexes) == 0 {
		return "none"
	}
	var parts []string
	for _, ix := range l.Indexes {
		k := ix.Hash
		if ix.Range != "" {
			k += ", " + ix.Range
		}
		parts = append(parts, fmt.Sprintf("%s (%s; %s)", ix.Name, k, ix.Projection))
	}
	return strings.Join(parts, "; ")
}

func perMessage(s Snapshot, n int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Ops)) {
		parts = append(parts, fmt.Sprintf("%s %s", k, f2(float64(s.Ops[k])/float64(n))))
	}
	return strings.Join(parts, ", ")
}
